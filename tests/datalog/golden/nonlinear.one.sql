-- fixpoint tc: init
CREATE TEMP TABLE "_tt_tc" ("a" BIGINT, "b" BIGINT);
CREATE TEMP TABLE "_tt_tc_delta" ("a" BIGINT, "b" BIGINT);
CREATE TEMP TABLE "_tt_tc_new" ("a" BIGINT, "b" BIGINT);
INSERT INTO temp.main."_tt_tc" SELECT DISTINCT t0."a" AS "a", t0."b" AS "b" FROM "edge" AS t0;
INSERT INTO temp.main."_tt_tc_delta" SELECT * FROM temp.main."_tt_tc";
-- repeat: step
DELETE FROM temp.main."_tt_tc_new";
INSERT INTO temp.main."_tt_tc_new" (SELECT t0."a" AS "a", t1."b" AS "b" FROM temp.main."_tt_tc_delta" AS t0, temp.main."_tt_tc" AS t1 WHERE t1."a" = t0."b" UNION SELECT t0."a" AS "a", t1."b" AS "b" FROM temp.main."_tt_tc" AS t0, temp.main."_tt_tc_delta" AS t1 WHERE t1."a" = t0."b") EXCEPT SELECT * FROM temp.main."_tt_tc";
-- until zero: SELECT (SELECT count(*) FROM temp.main."_tt_tc_new");
-- advance
INSERT INTO temp.main."_tt_tc" SELECT * FROM temp.main."_tt_tc_new";
DELETE FROM temp.main."_tt_tc_delta";
INSERT INTO temp.main."_tt_tc_delta" SELECT * FROM temp.main."_tt_tc_new";
-- end fixpoint
-- output tc
SELECT * FROM temp.main."_tt_tc";
