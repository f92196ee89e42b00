"""An application queueing tasks in its own transactions through SQL (`taskhost_add`), with the
driver a Python application uses for each database: psycopg (PostgreSQL), PyMySQL (MariaDB/MySQL)
or the standard library's sqlite3. Prints one JSON line of what it saw.

Usage: app.py DATABASE_URL
"""

import json
import sqlite3
import sys
from urllib.parse import unquote, urlparse


def connect(url):
    if url.startswith("postgres"):
        import psycopg

        return "postgres", psycopg.connect(url)
    if url.startswith("mysql"):
        import pymysql

        u = urlparse(url)
        conn = pymysql.connect(
            host=u.hostname, port=u.port or 3306, user=unquote(u.username or ""),
            password=unquote(u.password or ""), database=u.path.lstrip("/"), autocommit=False,
        )
        return "mysql", conn
    path = url.split("://", 1)[1].split("?", 1)[0]
    return "sqlite", sqlite3.connect(path)


def add(kind, cur, handler, data, **options):
    """Queue one task in the cursor's transaction; its id."""
    if kind == "postgres":
        names = "".join(f", {k} => %({k})s" for k in options)
        cur.execute(f"SELECT taskhost_add(%(handler)s, %(data)s{names})", dict(options, handler=handler, data=data))
        return cur.fetchone()[0]
    if kind == "mysql":
        cur.execute("CALL taskhost_add(%s, %s, %s)", (handler, data, json.dumps(options) if options else None))
        (task,) = cur.fetchone()
        while cur.nextset():
            pass
        return task
    if "after" in options:
        options["after"] = json.dumps(options["after"])
    columns = ["handler", "data", *options]
    marks = ", ".join("?" for _ in columns)
    cur.execute(f'INSERT INTO taskhost_add ({", ".join(columns)}) VALUES ({marks})', [handler, data, *options.values()])
    cur.execute("SELECT id FROM taskhost_added")
    return cur.fetchone()[0]


def main():
    kind, conn = connect(sys.argv[1])
    seen = {}
    cur = conn.cursor()
    cur.execute("CREATE TABLE app_orders (id INTEGER, note TEXT)")
    conn.commit()

    # A rolled-back transaction leaves neither the application's row nor the task.
    cur.execute("INSERT INTO app_orders (id, note) VALUES (1, 'rolled back')")
    seen["rolled_back"] = add(kind, cur, "echo", '{"order": 1}')
    conn.rollback()

    # A committed one leaves both, and the task runs.
    cur.execute("INSERT INTO app_orders (id, note) VALUES (2, 'committed')")
    seen["committed"] = add(kind, cur, "echo", '{"order": 2}', queue="default", priority=-1, unique_key="order-2")
    seen["again"] = add(kind, cur, "echo", '{"order": 2}', unique_key="order-2")
    conn.commit()

    # Bad input is an error naming what is wrong, and the transaction loses nothing else.
    cur.execute("INSERT INTO app_orders (id, note) VALUES (3, 'refused')")
    try:
        add(kind, cur, "echo", '{"order": ')
        seen["bad_data"] = None
    except Exception as e:  # each driver's own error class
        seen["bad_data"] = str(e)
    conn.rollback()
    cur.execute("SELECT id FROM app_orders ORDER BY id")
    seen["orders"] = [r[0] for r in cur.fetchall()]
    conn.commit()
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
