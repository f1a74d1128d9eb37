-- fixpoint odd, even: init
CREATE TEMP TABLE "_tt_odd" ("n" VARCHAR);
CREATE TEMP TABLE "_tt_odd_delta" ("n" VARCHAR);
CREATE TEMP TABLE "_tt_odd_new" ("n" VARCHAR);
INSERT INTO temp.main."_tt_odd_delta" SELECT * FROM temp.main."_tt_odd";
CREATE TEMP TABLE "_tt_even" ("n" VARCHAR);
CREATE TEMP TABLE "_tt_even_delta" ("n" VARCHAR);
CREATE TEMP TABLE "_tt_even_new" ("n" VARCHAR);
INSERT INTO temp.main."_tt_even" SELECT DISTINCT * FROM (VALUES ('a')) AS v("n");
INSERT INTO temp.main."_tt_even_delta" SELECT * FROM temp.main."_tt_even";
-- repeat: step
DELETE FROM temp.main."_tt_odd_new";
INSERT INTO temp.main."_tt_odd_new" (SELECT t1."b" AS "n" FROM temp.main."_tt_even_delta" AS t0, "edge" AS t1 WHERE t1."a" = t0."n") EXCEPT SELECT * FROM temp.main."_tt_odd";
DELETE FROM temp.main."_tt_even_new";
INSERT INTO temp.main."_tt_even_new" (SELECT t1."b" AS "n" FROM temp.main."_tt_odd_delta" AS t0, "edge" AS t1 WHERE t1."a" = t0."n") EXCEPT SELECT * FROM temp.main."_tt_even";
-- until zero: SELECT (SELECT count(*) FROM temp.main."_tt_odd_new") + (SELECT count(*) FROM temp.main."_tt_even_new");
-- advance
INSERT INTO temp.main."_tt_odd" SELECT * FROM temp.main."_tt_odd_new";
DELETE FROM temp.main."_tt_odd_delta";
INSERT INTO temp.main."_tt_odd_delta" SELECT * FROM temp.main."_tt_odd_new";
INSERT INTO temp.main."_tt_even" SELECT * FROM temp.main."_tt_even_new";
DELETE FROM temp.main."_tt_even_delta";
INSERT INTO temp.main."_tt_even_delta" SELECT * FROM temp.main."_tt_even_new";
-- end fixpoint
-- output odd
SELECT * FROM temp.main."_tt_odd";
-- output even
SELECT * FROM temp.main."_tt_even";
