-- output op2
SELECT * FROM (VALUES ('extra', 1)) AS v("name", "n") UNION SELECT t0."name" AS "name", t0."n" AS "n" FROM "op" AS t0 WHERE contains(t0."name", 'add') AND t0."n" <> 0;
