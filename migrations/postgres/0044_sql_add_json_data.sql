-- `taskhost_add` takes its data as `jsonb` or `json` too, as an application most often holds it
-- (a `jsonb` column, `jsonb_build_object(...)`, psycopg's `Jsonb(...)`, a trigger's NEW.payload):
-- with data `text` alone such a call found no function ("function taskhost_add(unknown, jsonb)
-- does not exist"). Each is the text function's arguments with the data's type changed and no
-- default for it, and calls it with the data as text, so every check and message is the text
-- function's. Their options default to NULL, which the text function reads as its own default
-- (so a default changed there holds here too). A call whose data is a quoted literal, NULL or
-- left out still finds the text function alone: an argument of unknown type goes to the candidate
-- taking text, and a call without data matches no function that needs it. Their grants are those
-- of the text function (a role that may call that may call these, and PUBLIC only if it may call
-- that); they run with the caller's rights, as it does.
DO $make$
DECLARE
    g record;
    f text;
    options constant text := 'text, integer, timestamptz, text, integer, text, bigint[], boolean, text, interval, '
        'text, interval, text';
BEGIN
    FOREACH f IN ARRAY ARRAY['jsonb', 'json'] LOOP
        EXECUTE format($sql$
            CREATE FUNCTION taskhost_add(
                handler      text,
                data         %s,
                queue        text DEFAULT NULL,
                priority     integer DEFAULT NULL,
                run_at       timestamptz DEFAULT NULL,
                unique_key   text DEFAULT NULL,
                max_attempts integer DEFAULT NULL,
                key          text DEFAULT NULL,
                after        bigint[] DEFAULT NULL,
                run_anyway   boolean DEFAULT NULL,
                queued_by    text DEFAULT NULL,
                unique_for   interval DEFAULT NULL,
                unique_states text DEFAULT NULL,
                run_timeout  interval DEFAULT NULL,
                version      text DEFAULT NULL
            ) RETURNS bigint
            LANGUAGE sql VOLATILE
            SET search_path FROM CURRENT
            AS $fn$ SELECT taskhost_add($1, $2::text, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) $fn$
        $sql$, f);
        EXECUTE format('REVOKE ALL ON FUNCTION taskhost_add(text, %s, %s) FROM PUBLIC', f, options);
        FOR g IN SELECT DISTINCT a.grantee FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
                 WHERE p.oid = format('taskhost_add(text, text, %s)', options)::regprocedure
                     AND a.privilege_type = 'EXECUTE' LOOP
            EXECUTE format('GRANT EXECUTE ON FUNCTION taskhost_add(text, %s, %s) TO %s', f, options,
                CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END);
        END LOOP;
    END LOOP;
END
$make$;
