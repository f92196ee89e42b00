// What an INSERT into SQLite's `taskhost_add` view costs against plain INSERTs of its rows, in SQLite
// itself (no driver in between): for each database file given, in one long transaction, batches of
// adds and batches of the INSERTs alternate; the first round is left out. Also SQLite's own steps a
// call (SQLITE_STMTSTATUS_VM_STEP), which do not drift with the machine.
//
// Build: cc -O2 -o target/sql-add-sqlite bench/sql-add-sqlite.c -lsqlite3   (libsqlite3-dev)
// Usage: target/sql-add-sqlite none|unique|after ROUNDS BATCH FILE...   (bench/sql-add.sh runs it)
// Each FILE, a database `taskhost migrate` made, is copied first (into /tmp) and left as it was.
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOW "strftime('%Y-%m-%d %H:%M:%f', 'now') || '000'"

typedef struct {
    sqlite3 *db;
    sqlite3_stmt *add, *row, *dep; // dep: the dependency's INSERT, for `after`
    char after[32];
    double t_add, t_ins;
    long n, steps_add, steps_ins;
} Db;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void fail(sqlite3 *db, const char *what) {
    fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(db));
    exit(1);
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql) {
    sqlite3_stmt *s = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &s, 0) != SQLITE_OK) fail(db, sql);
    return s;
}

// Binds by name what the statement has (?1 data, ?2 unique key, ?3 after), runs it; its steps.
static long run(sqlite3 *db, sqlite3_stmt *s, const char *key, const char *after) {
    int n = sqlite3_bind_parameter_count(s);
    sqlite3_bind_text(s, 1, "{\"n\": 1}", -1, SQLITE_STATIC);
    if (n >= 2) sqlite3_bind_text(s, 2, key, -1, SQLITE_TRANSIENT);
    if (n >= 3) sqlite3_bind_text(s, 3, after, -1, SQLITE_STATIC);
    if (sqlite3_step(s) != SQLITE_DONE) fail(db, "step");
    sqlite3_reset(s);
    return sqlite3_stmt_status(s, SQLITE_STMTSTATUS_VM_STEP, 1);
}

static void open_copy(Db *d, const char *kind, const char *file, const char *dir, int i) {
    char path[512];
    snprintf(path, sizeof path, "%s/copy-%d.db", dir, i);
    // Copied by SQLite, so what the file's log holds comes too.
    sqlite3 *from;
    if (sqlite3_open_v2(file, &from, SQLITE_OPEN_READONLY, 0) != SQLITE_OK) fail(from, file);
    if (sqlite3_open(path, &d->db) != SQLITE_OK) fail(d->db, path);
    sqlite3_backup *b = sqlite3_backup_init(d->db, "main", from, "main");
    if (!b || sqlite3_backup_step(b, -1) != SQLITE_DONE) fail(d->db, "copy");
    sqlite3_backup_finish(b);
    sqlite3_close(from);
    // The task `after` names: one that exists, scheduled.
    if (sqlite3_exec(d->db, "PRAGMA journal_mode = WAL; BEGIN IMMEDIATE; INSERT INTO task_queue (queued_on, "
                     "scheduled_on, task_handler_class, task_data) VALUES (" NOW ", " NOW ", 'noop', '{}')",
                     0, 0, 0) != SQLITE_OK)
        fail(d->db, "begin");
    snprintf(d->after, sizeof d->after, "[%lld]", (long long)sqlite3_last_insert_rowid(d->db));
    d->dep = 0;
    if (!strcmp(kind, "none")) {
        d->add = prepare(d->db, "INSERT INTO taskhost_add (handler, data) VALUES ('noop', ?1)");
        d->row = prepare(d->db, "INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data) "
                                "VALUES (" NOW ", " NOW ", 'noop', ?1)");
    } else if (!strcmp(kind, "unique")) {
        d->add = prepare(d->db, "INSERT INTO taskhost_add (handler, data, unique_key) VALUES ('noop', ?1, ?2)");
        d->row = prepare(d->db, "INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data, "
                                "unique_key, active_unique_key) VALUES (" NOW ", " NOW ", 'noop', ?1, ?2, ?2)");
    } else {
        d->add = prepare(d->db, "INSERT INTO taskhost_add (handler, data, \"after\") VALUES ('noop', ?1, ?3)");
        // As the view writes a task that waits for one: the task, then its dependency.
        d->row = prepare(d->db, "INSERT INTO task_queue (queued_on, scheduled_on, task_handler_class, task_data, "
                                "last_status, waiting_for) VALUES (" NOW ", " NOW ", 'noop', ?1, 'waiting', -1)");
        d->dep = prepare(d->db, "INSERT INTO task_deps (task_id, after_id, met) VALUES (last_insert_rowid(), ?3, -1)");
    }
    d->t_add = d->t_ins = 0;
    d->n = d->steps_add = d->steps_ins = 0;
}

int main(int argc, char **argv) {
    if (argc < 5 || (strcmp(argv[1], "none") && strcmp(argv[1], "unique") && strcmp(argv[1], "after"))) {
        fprintf(stderr, "usage: %s none|unique|after ROUNDS BATCH FILE...\n", argv[0]);
        return 2;
    }
    int rounds = atoi(argv[2]), batch = atoi(argv[3]), nd = argc - 4;
    char dir[] = "/tmp/sql-add-sqlite-XXXXXX", key[32];
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    Db *d = calloc(nd, sizeof *d);
    if (!d) return 1;
    for (int i = 0; i < nd; i++) open_copy(&d[i], argv[1], argv[4 + i], dir, i);
    long counter = 0;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < nd; i++) {
            long s_ins = 0, s_add = 0;
            double t0 = now();
            for (int j = 0; j < batch; j++) {
                snprintf(key, sizeof key, "k%ld", counter++);
                s_ins += run(d[i].db, d[i].row, key, d[i].after);
                if (d[i].dep) s_ins += run(d[i].db, d[i].dep, key, d[i].after);
            }
            double t1 = now();
            for (int j = 0; j < batch; j++) {
                snprintf(key, sizeof key, "k%ld", counter++);
                s_add += run(d[i].db, d[i].add, key, d[i].after);
            }
            double t2 = now();
            if (r > 0) {
                d[i].t_ins += t1 - t0, d[i].t_add += t2 - t1, d[i].n += batch;
                d[i].steps_ins += s_ins, d[i].steps_add += s_add;
            }
        }
    for (int i = 0; i < nd; i++) {
        printf("%-30s %-6s add %6.2f us %4ld steps | its INSERTs %6.2f us %4ld steps | ratio %.2f\n", argv[4 + i],
               argv[1], d[i].t_add / d[i].n * 1e6, d[i].steps_add / d[i].n, d[i].t_ins / d[i].n * 1e6,
               d[i].steps_ins / d[i].n, d[i].t_add / d[i].t_ins);
        sqlite3_close_v2(d[i].db); // the transaction is rolled back: the copy is thrown away
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 1;
}
