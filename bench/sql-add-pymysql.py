# What each kind of `taskhost_add` call costs an application on MariaDB or MySQL, from Python's
# PyMySQL (each its own transaction), beside a plain INSERT of its row (bench/sql-add.sh runs it).
# Usage: python3 bench/sql-add-pymysql.py DRIVERS_DIR DATABASE [PORT]   (a database `taskhost migrate`
# made; PORT 3306, MariaDB's of `make services`, or 3310, MySQL's)
import sys, time, uuid
sys.path.insert(0, sys.argv[1])
import pymysql
c = pymysql.connect(host='127.0.0.1', port=int(sys.argv[3]) if len(sys.argv) > 3 else 3306, user='taskhost',
                    database=sys.argv[2], autocommit=True)
cur = c.cursor()
INS = "INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data{}) VALUES (UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), 'noop', '{{\"n\": 1}}'{})"
def call(opts):
    def f():
        cur.execute("CALL taskhost_add('noop', '{\"n\": 1}', %s)", (opts() if callable(opts) else opts,))
        while cur.nextset(): pass
    return f
def deps():
    cur.execute("BEGIN")
    cur.execute(INS.format(", last_status, waiting_for", ", 'waiting', -1"))
    cur.execute("INSERT INTO task_deps (task_id, after_id, met) VALUES (LAST_INSERT_ID(), 1, -1)")
    cur.execute("COMMIT")
kinds = [
    ("INSERT", lambda: cur.execute(INS.format("", ""))),
    ("no options", call(None)),
    ("queue, priority", call('{"queue": "mail", "priority": 1}')),
    ("key", call('{"key": "tenant-1"}')),
    ("INSERT with a unique key", lambda: cur.execute(INS.format(", unique_key, active_unique_key", ", %s, %s"), (str(uuid.uuid4()),) * 2)),
    ("unique_key", call(lambda: '{"unique_key": "%s"}' % uuid.uuid4())),
    ("run_at", call('{"run_at": "2030-01-01T00:00:00Z"}')),
    ("unique_key, unique_for", call(lambda: '{"unique_key": "%s", "unique_for": 3600}' % uuid.uuid4())),
    ("INSERT of the task and its dependency, one transaction", deps),
    # (Task 1 is the first INSERT's.)
    ("after", call('{"after": [1]}')),
]
for rep in (1, 2):
    for name, f in kinds:
        t = time.perf_counter()
        for _ in range(3000): f()
        print(f"rep {rep}  {name}: {(time.perf_counter() - t) / 3000 * 1e3:.3f} ms")
