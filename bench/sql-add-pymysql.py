# What each kind of `taskhost_add` call costs an application on MariaDB or MySQL, from Python's
# PyMySQL (each its own transaction, then many in one), beside plain INSERTs of its rows (bench/sql-add.sh runs it).
# Usage: python3 bench/sql-add-pymysql.py DRIVERS_DIR DATABASE [PORT]   (a database `taskhost migrate`
# made; PORT 3306, MariaDB's of `make services`, or 3310, MySQL's)
import statistics, sys, time, uuid
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
def deps(in_tx):
    def f():
        if not in_tx: cur.execute("BEGIN")
        cur.execute(INS.format(", last_status, waiting_for", ", 'waiting', -1"))
        cur.execute("INSERT INTO task_deps (task_id, after_id, met) VALUES (LAST_INSERT_ID(), 1, -1)")
        if not in_tx: cur.execute("COMMIT")
    return f
def kinds(in_tx):
    """Each call, and the plain INSERT(s) of its rows it is compared with."""
    return [
        ("INSERT", lambda: cur.execute(INS.format("", "")), None),
        ("no options", call(None), "INSERT"),
        ("queue, priority", call('{"queue": "mail", "priority": 1}'), "INSERT"),
        ("key", call('{"key": "tenant-1"}'), "INSERT"),
        ("max_attempts", call('{"max_attempts": 3}'), "INSERT"),
        ("run_at", call('{"run_at": "2030-01-01T00:00:00Z"}'), "INSERT"),
        ("INSERT with a unique key", lambda: cur.execute(INS.format(", unique_key, active_unique_key", ", %s, %s"), (str(uuid.uuid4()),) * 2), None),
        ("unique_key", call(lambda: '{"unique_key": "%s"}' % uuid.uuid4()), "INSERT with a unique key"),
        ("unique_key, unique_for", call(lambda: '{"unique_key": "%s", "unique_for": 3600}' % uuid.uuid4()), "INSERT with a unique key"),
        ("INSERT of the task and its dependency", deps(in_tx), None),
        # (Task 1 is the first INSERT's.)
        ("after", call('{"after": [1]}'), "INSERT of the task and its dependency"),
    ]
# Two ways an application calls it: each call its own transaction (committed), and many in one
# transaction (1,000, rolled back: no commit in either side). The kinds alternate within each of
# ROUNDS rounds (every other one in reverse order), and each call is compared with the INSERTs of
# the same round, so that the machine's drift over minutes (a third here) moves both sides alike.
ROUNDS, N = 4, 1000
for in_tx in (False, True):
    print("many in one transaction" if in_tx else "each its own transaction")
    us = {}
    for r in range(ROUNDS):
        # (In reverse order every other round, so that no kind always follows the same one.)
        for name, f, _base in kinds(in_tx)[::-1 if r % 2 else 1]:
            if in_tx: cur.execute("START TRANSACTION")
            t = time.perf_counter()
            for _ in range(N): f()
            us.setdefault(name, []).append((time.perf_counter() - t) / N * 1e6)
            if in_tx: cur.execute("ROLLBACK")
    for name, _f, base in kinds(in_tx):
        ratios = "" if base is None else "  ratio %.2f - %.2f (median %.2f)" % (
            min(r := [a / b for a, b in zip(us[name], us[base])]), max(r), statistics.median(r))
        print(f"  {name}: {min(us[name]):.0f} - {max(us[name]):.0f} us{ratios}")
