/*
 * reload_lib.S - two libraries of one layout for tests/reload_test.sh: RELOAD_CALL(cb) calls cb
 * back, its return address at the same offset (+6) in both, so a library of the other flavour
 * mapped where one was unloaded puts a different frame under the same PC.
 *   flavour A (a_call): keeps a frame pointer: at the call, CFA = %rbp + 16, %rbp saved at CFA - 16
 *   flavour B (b_call): no frame pointer:      at the call, CFA = %rsp + 16, %rbp left as it was
 * A's rule read at B's PC takes the CFA from the caller's %rbp and skips the caller's frame.
 */
#ifdef RELOAD_B
#define RELOAD_CALL b_call
#else
#define RELOAD_CALL a_call
#endif
    .text
    .globl RELOAD_CALL
    .type RELOAD_CALL, @function
    .p2align 4
RELOAD_CALL:
    .cfi_startproc
#ifdef RELOAD_B
    sub $8, %rsp            /* 4 bytes */
    .cfi_def_cfa_offset 16
    call *%rdi              /* at +4, returns to +6 */
    add $8, %rsp
    .cfi_def_cfa_offset 8
    ret
#else
    push %rbp               /* 1 byte */
    .cfi_def_cfa_offset 16
    .cfi_offset %rbp, -16
    mov %rsp, %rbp          /* 3 bytes */
    .cfi_def_cfa_register %rbp
    call *%rdi              /* at +4, returns to +6 */
    pop %rbp
    .cfi_def_cfa %rsp, 8
    ret
#endif
    .cfi_endproc
    .size RELOAD_CALL, .-RELOAD_CALL
    .section .note.GNU-stack,"",@progbits
