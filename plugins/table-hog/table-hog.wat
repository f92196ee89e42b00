;; Hostile: grows a table until the host refuses, then traps. Written in WAT because no
;; toolchain here emits table.grow on a funcref table; the canonical-ABI signature of `handle`
;; is spelled out by hand (task: 10 flat values; the result goes through memory).
(module
  (memory (export "memory") 1)
  (table $hog 0 funcref)
  (global $heap (mut i32) (i32.const 1024))
  ;; A bump allocator: all the host needs to pass the task's strings in.
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $at i32)
    (local.set $at (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (i32.add (local.get 3) (i32.const 8))))
    (local.get $at))
  (func (export "handle")
    (param i64 i64 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
    (loop $again
      (if (i32.lt_s (table.grow $hog (ref.null func) (i32.const 1000)) (i32.const 0))
        (then unreachable))
      (br $again))
    (i32.const 0))
)
