-- output caller_of
WITH RECURSIVE "_tt_caller_of_rec"("fn") AS ((SELECT t1."caller" AS "fn" FROM "seed" AS t0, "calls" AS t1 WHERE t1."callee" = t0."fn") UNION (SELECT t1."caller" AS "fn" FROM "_tt_caller_of_rec" AS t0, "calls" AS t1 WHERE t1."callee" = t0."fn")) SELECT * FROM "_tt_caller_of_rec";
