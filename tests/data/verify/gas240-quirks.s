# CFI that GNU as 2.40 (SFrame V1) translates its own way: .cfi_undefined of the RA and
# .cfi_same_value of the FP are ignored, .cfi_remember_state remembers the last row written.
# as 2.40: as --gsframe -o gas240-quirks.o gas240-quirks.s
	.text
	.globl plain
	.type plain, @function
plain:
	.cfi_startproc
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	mov %rsp, %rbp
	.cfi_def_cfa_register rbp
	nop
	leave
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size plain, .-plain

	.globl undef_ra
	.type undef_ra, @function
undef_ra:
	.cfi_startproc
	.cfi_undefined rip
	xor %ebp, %ebp
	nop
	ret
	.cfi_endproc
	.size undef_ra, .-undef_ra

	.globl remember
	.type remember, @function
remember:
	.cfi_startproc
	push %rbx
	.cfi_def_cfa_offset 16
	.cfi_offset rbx, -16
	test %rdi, %rdi
	je 1f
	.cfi_remember_state
	pop %rbx
	.cfi_def_cfa_offset 8
	ret
1:
	.cfi_restore_state
	push %rbp
	.cfi_def_cfa_offset 24
	.cfi_offset rbp, -24
	.cfi_remember_state
	pop %rbp
	.cfi_restore rbp
	.cfi_def_cfa_offset 16
	pop %rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_restore_state
	nop
	pop %rbp
	pop %rbx
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size remember, .-remember

	.globl same_fp
	.type same_fp, @function
same_fp:
	.cfi_startproc
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	nop
	pop %rbp
	.cfi_same_value rbp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size same_fp, .-same_fp

	.globl args_size
	.type args_size, @function
args_size:
	.cfi_startproc
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	mov %rsp, %rbp
	.cfi_def_cfa_register rbp
	.cfi_escape 0x2e, 0x10
	push %rax
	nop
	.cfi_escape 0x2e, 0x0
	leave
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size args_size, .-args_size
