# CFI that GNU as (2.40 to 2.47) translates into rows the CFI does not say.
# as 2.47: as --gsframe -o gas-cfi-bugs.o gas-cfi-bugs.s
	.text
	.globl defreg_stale
	.type defreg_stale, @function
defreg_stale:
	.cfi_startproc
	push %rbp
	.cfi_def_cfa_offset 16
	.cfi_offset rbp, -16
	mov %rsp, %rbp
	# def_cfa_register keeps the CFA offset of 24 just set (DWARF 5 6.4.2.2);
	# gas takes the offset of the last row it wrote (16).
	.cfi_def_cfa_offset 24
	.cfi_def_cfa_register rbp
	nop
	leave
	.cfi_def_cfa rsp, 8
	ret
	.cfi_endproc
	.size defreg_stale, .-defreg_stale

	.globl restore_to_cie
	.type restore_to_cie, @function
restore_to_cie:
	.cfi_startproc
	# A rule before the first row: .cfi_restore returns to the CIE's rule (DWARF 5
	# 6.4.2.3), gas to the function's first row.
	.cfi_offset rbp, -16
	push %rbp
	.cfi_def_cfa_offset 16
	nop
	.cfi_restore rbp
	pop %rbp
	.cfi_def_cfa_offset 8
	ret
	.cfi_endproc
	.size restore_to_cie, .-restore_to_cie
