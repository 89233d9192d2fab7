/* vfork() for programs linked with libspanring (aarch64 Linux): the aarch64 twin of
 * vfork_x86_64.S, for the same reason.
 *
 * A vfork child runs on its parent's memory and thread-local storage until it calls exec or
 * _exit. If it emitted a span there, the record would go into the parent thread's ring under the
 * parent's pid/tid. This wrapper marks the calling thread (spanring_vfork_child = 1) before the
 * syscall; the child keeps the mark, so its records are dropped and counted; the parent clears
 * it when it resumes. aarch64 Linux has no vfork syscall: like glibc's aarch64 vfork, this is
 * clone(CLONE_VM | CLONE_VFORK | SIGCHLD, sp). The return address is in x30, a register, so the
 * child cannot overwrite it through the shared stack (x86-64 has to keep it off the stack).
 * The mark is an initial-exec TLS variable: tpidr_el0 plus its GOT-held offset.
 */
        .text
        .globl  vfork
        .type   vfork, %function
        .p2align 2
vfork:
        adrp    x9, :gottprel:spanring_vfork_child
        ldr     x9, [x9, #:gottprel_lo12:spanring_vfork_child]
        mrs     x10, tpidr_el0
        mov     w11, #1
        str     w11, [x10, x9]          /* mark this thread before the child can run */
        /* The thread's gate (thread_state.h): kGateVfork (0x40000) in the word at offset 56 of
         * the state t_self points to, set with an exclusive pair (a signal handler of this
         * thread that changes the word in between makes the store fail, and it is retried).
         * x12 keeps the state across the syscall. A thread without a state of its own points
         * at the library's closed state (src/producer.h, g_closed_state: read-only, its gate
         * never open): nothing to mark, x12 is 0 then. */
        adrp    x12, :gottprel:_ZN8spanring6detail6t_selfE
        ldr     x12, [x12, #:gottprel_lo12:_ZN8spanring6detail6t_selfE]
        ldr     x12, [x10, x12]
        adrp    x13, _ZN8spanring14g_closed_stateE
        add     x13, x13, :lo12:_ZN8spanring14g_closed_stateE
        cmp     x12, x13
        csel    x12, xzr, x12, eq
        cbz     x12, 3f
        add     x12, x12, #56
5:      ldxr    w13, [x12]
        orr     w13, w13, #0x40000
        stxr    w14, w13, [x12]
        cbnz    w14, 5b
3:
        mov     x0, #0x4111             /* CLONE_VM | CLONE_VFORK | SIGCHLD */
        mov     x1, sp                  /* the child runs on this stack until exec/_exit */
        mov     x2, #0
        mov     x3, #0
        mov     x4, #0
        mov     x8, #220                /* __NR_clone */
        svc     #0
        cbz     x0, 1f                  /* child: keep the mark until exec or _exit */
        str     wzr, [x10, x9]          /* parent: x9, x10 survive the syscall (the kernel
                                           restores every register but x0) */
        cbz     x12, 4f                 /* the state the mark was set in */
6:      ldxr    w13, [x12]
        and     w13, w13, #0xfffbffff
        stxr    w14, w13, [x12]
        cbnz    w14, 6b
4:      cmn     x0, #4095
        b.cs    2f
1:      ret
2:      neg     x0, x0
        b       spanring_vfork_failed   /* sets errno, returns -1 to our caller */
        .size   vfork, .-vfork
        .section .note.GNU-stack,"",%progbits
