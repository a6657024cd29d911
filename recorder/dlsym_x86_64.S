/*
 * dlsym_x86_64.S - the dlsym interposer's entry, in assembly so that it is a true tail jump in
 * every build type.
 *
 * glibc resolves RTLD_NEXT (and the caller's namespace) from the return address it sees.  A C
 * wrapper that calls the real dlsym makes every other library's dlsym(RTLD_NEXT, "malloc") search
 * after libcumemhist instead of after itself, which sends a malloc wrapper into itself forever.
 * So: names that do not start with "cu", and any RTLD_NEXT request, jump straight to the real
 * dlsym with the caller's return address untouched.  Only "cu*" lookups on a handle or
 * RTLD_DEFAULT go to cmh_dlsym_cu (driver.c), which may hand back a wrapper.
 */
    .text
    .globl dlsym
    .type dlsym, @function
    .p2align 4
dlsym:
    .cfi_startproc
    testq %rsi, %rsi
    jz 1f
    cmpb $0x63, (%rsi)          /* 'c' */
    jne 1f
    cmpb $0x75, 1(%rsi)         /* 'u' */
    jne 1f
    cmpq $-1, %rdi              /* RTLD_NEXT */
    je 1f
    jmp cmh_dlsym_cu
1:
    movq cmh_real_dlsym(%rip), %rax
    testq %rax, %rax
    jz 2f
    jmp *%rax
2:
    pushq %rdi
    .cfi_adjust_cfa_offset 8
    pushq %rsi
    .cfi_adjust_cfa_offset 8
    subq $8, %rsp
    .cfi_adjust_cfa_offset 8
    call cmh_dlsym_resolve
    addq $8, %rsp
    .cfi_adjust_cfa_offset -8
    popq %rsi
    .cfi_adjust_cfa_offset -8
    popq %rdi
    .cfi_adjust_cfa_offset -8
    jmp *%rax
    .cfi_endproc
    .size dlsym, .-dlsym
    .section .note.GNU-stack,"",@progbits
