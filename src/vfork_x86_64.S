/* vfork() for programs linked with libspanring (x86-64 Linux).
 *
 * A vfork child runs on its parent's memory, stack and thread-local storage until it calls
 * exec or _exit. If it emitted a span there, the record would go into the parent thread's ring
 * under the parent's pid/tid. This wrapper marks the calling thread (spanring_vfork_child = 1)
 * before the syscall; the child keeps the mark, so its records are dropped and counted; the
 * parent clears it when it resumes. Like glibc's own vfork, the return address is kept in a
 * register across the syscall, since the child may overwrite the shared stack.
 * (posix_spawn and system() use clone() inside glibc and run no user code before exec.)
 */
        .text
        .globl  vfork
        .type   vfork, @function
vfork:
        movq    spanring_vfork_child@gottpoff(%rip), %rcx
        movl    $1, %fs:(%rcx)
        /* The thread's gate (thread_state.h): kGateVfork (0x40000) in the word at offset 56 of
         * the state t_self points to, so that the inline record paths, which test only the
         * gate, send the child's records to the library (which drops them). One `or` to
         * memory: a signal handler of this thread runs wholly before or after it. %rsi keeps
         * the state across the syscall (the kernel preserves it; %rcx and %r11 it does not).
         * A thread without a state of its own points at the library's closed state
         * (src/producer.h, g_closed_state: read-only, its gate never open): nothing to mark,
         * %rsi is 0 then. */
        movq    _ZN8spanring6detail6t_selfE@gottpoff(%rip), %rsi
        movq    %fs:(%rsi), %rsi
        leaq    _ZN8spanring14g_closed_stateE(%rip), %rdx
        xorl    %eax, %eax
        cmpq    %rdx, %rsi
        cmoveq  %rax, %rsi
        testq   %rsi, %rsi
        jz      3f
        orl     $0x40000, 56(%rsi)
3:      popq    %rdi                    /* return address */
        movl    $58, %eax               /* __NR_vfork */
        syscall
        pushq   %rdi
        testq   %rax, %rax
        jz      1f                      /* child: keep the mark until exec or _exit */
        movq    spanring_vfork_child@gottpoff(%rip), %rcx
        movl    $0, %fs:(%rcx)          /* parent: the child has exec'd or exited */
        testq   %rsi, %rsi              /* the state the mark was set in, 0 for none (the */
        jz      4f                      /* child cannot replace t_self: it records nothing) */
        andl    $~0x40000, 56(%rsi)
4:      cmpq    $-4095, %rax
        jae     2f
1:      ret
2:      movq    %rax, %rdi
        negq    %rdi
        jmp     spanring_vfork_failed   /* sets errno, returns -1 to our caller */
        .size   vfork, .-vfork
        .section .note.GNU-stack,"",@progbits
