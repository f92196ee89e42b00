;; The no-op handler `taskhost bench` carries: a component of the task-handler world
;; (wit/task-handler.wit) that imports nothing and answers every task with ok(some("{}")).
(component
  (core module $noop
    (memory (export "memory") 1)
    ;; The result: ok (0) at 0; some (1) at 4; the string at 8 (where) and 12 (length).
    (data (i32.const 0) "\00\00\00\00\01\00\00\00\10\00\00\00\02\00\00\00{}")
    (global $next (mut i32) (i32.const 64))
    ;; The host copies the task's strings in: a bump allocator, growing memory as needed.
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $at i32)
      (local.set $at
        (i32.and
          (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
          (i32.sub (i32.const 0) (local.get 2))))
      (global.set $next (i32.add (local.get $at) (local.get 3)))
      (block $fits
        (br_if $fits (i32.le_u (global.get $next) (i32.shl (memory.size) (i32.const 16))))
        (br_if $fits
          (i32.ne
            (memory.grow (i32.add (i32.shr_u (global.get $next) (i32.const 16)) (i32.const 1) (i32.sub (memory.size))))
            (i32.const -1)))
        unreachable)
      (local.get $at))
    (func (export "handle") (param i64 i64 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
      (i32.const 0)))
  (core instance $i (instantiate $noop))
  (type $task (record
    (field "task-id" s64) (field "run-id" s64) (field "attempt" u32) (field "handler" string)
    (field "data" string) (field "queued-by" (option string))))
  (type $handler-error (record (field "code" string) (field "message" string) (field "retryable" bool)))
  (export $task-export "task" (type $task))
  (export $error-export "handler-error" (type $handler-error))
  (func $handle (param "task" $task-export) (result (result (option string) (error $error-export)))
    (canon lift (core func $i "handle") (memory (core memory $i "memory"))
      (realloc (core func $i "realloc"))))
  (export "handle" (func $handle)))
