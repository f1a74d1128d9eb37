CREATE TEMP TABLE "_tt_node" ("n" VARCHAR);
INSERT INTO temp.main."_tt_node" SELECT t0."a" AS "n" FROM "edge" AS t0 UNION SELECT t0."b" AS "n" FROM "edge" AS t0;
-- output leaf
SELECT DISTINCT t0."n" AS "n" FROM temp.main."_tt_node" AS t0 WHERE NOT EXISTS (SELECT 1 FROM "edge" AS t_n1 WHERE t_n1."a" = t0."n");
-- output stats
SELECT DISTINCT t0."n" AS "n", t_l1.v AS "fan", t_l3.v AS "total", (t_l5.v + 1) AS "lo" FROM temp.main."_tt_node" AS t0, LATERAL (SELECT count(*) AS v FROM (SELECT DISTINCT t_a2_0."a" AS _c0_0, t_a2_0."b" AS _c0_1 FROM "edge" AS t_a2_0 WHERE t_a2_0."a" = t0."n")) AS t_l1, LATERAL (SELECT coalesce(sum(_v), 0) AS v FROM (SELECT DISTINCT t_a4_0."a" AS _c0_0, t_a4_0."v" AS _c0_1, (t_a4_0."v" * 2) AS _v FROM "w" AS t_a4_0 WHERE t_a4_0."a" = t0."n")) AS t_l3, LATERAL (SELECT min(_v) AS v FROM (SELECT DISTINCT t_a6_0."a" AS _c0_0, t_a6_0."v" AS _c0_1, t_a6_0."v" AS _v FROM "w" AS t_a6_0 WHERE t_a6_0."a" = t0."n" AND t_a6_0."v" > 0)) AS t_l5 WHERE t_l5.v IS NOT NULL AND t_l1.v >= 1;
