package bwrap

import (
	"encoding/binary"
	"fmt"
	"runtime"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Seccomp return values (linux/seccomp.h).
const (
	retAllow       = 0x7fff0000
	retErrno       = 0x00050000
	retKillProcess = 0x80000000
)

// nsFlags are clone flags that create namespaces: denied to sandboxed
// code (bwrap has already built its namespaces when the filter loads).
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// deniedSyscalls answer EPERM: kernel-attack surface a shell user never
// needs (mounts, module loading, ptrace of other processes, keyrings, bpf,
// perf, io_uring, new namespaces, handle-based opens).
func deniedSyscalls() []uint32 {
	nrs := []uintptr{
		unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT,
		unix.SYS_PTRACE, unix.SYS_PROCESS_VM_READV, unix.SYS_PROCESS_VM_WRITEV,
		unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
		unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
		unix.SYS_UNSHARE, unix.SYS_SETNS, unix.SYS_USERFAULTFD,
		unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_NAME_TO_HANDLE_AT,
		unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT, unix.SYS_SYSLOG, unix.SYS_ACCT, unix.SYS_QUOTACTL,
		unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
		unix.SYS_FSOPEN, unix.SYS_FSMOUNT, unix.SYS_FSCONFIG, unix.SYS_MOVE_MOUNT, unix.SYS_OPEN_TREE, unix.SYS_MOUNT_SETATTR,
	}
	out := make([]uint32, len(nrs))
	for i, n := range nrs {
		out[i] = uint32(n)
	}
	return out
}

// auditArch is the seccomp_data.arch value of this build's architecture.
func auditArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, nil
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, nil
	}
	return 0, fmt.Errorf("seccomp filter: unsupported architecture %s", runtime.GOARCH)
}

// seccompProgram is the classic BPF program bwrap loads with --seccomp:
// a foreign architecture (or the x32 ABI) kills the process; denied
// syscalls and namespace-creating clone calls answer EPERM; clone3 (whose
// flags live in memory a filter cannot read) answers ENOSYS so libc falls
// back to clone; everything else is allowed.
func seccompProgram() ([]byte, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	const (
		offNr   = 0
		offArch = 4
		offArg0 = 16 // args[0], low 32 bits (little endian)
	)
	var prog []bpf.Instruction
	prog = append(prog,
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch, SkipTrue: 1},
		bpf.RetConstant{Val: retKillProcess},
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	)
	if runtime.GOARCH == "amd64" {
		// x32 syscalls carry bit 30; refuse the whole ABI.
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: 0x40000000, SkipFalse: 1},
			bpf.RetConstant{Val: retErrno | uint32(unix.EPERM)},
		)
	}
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(unix.SYS_CLONE3), SkipFalse: 1},
		bpf.RetConstant{Val: retErrno | uint32(unix.ENOSYS)},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(unix.SYS_CLONE), SkipFalse: 4},
		bpf.LoadAbsolute{Off: offArg0, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: nsFlags, SkipFalse: 1},
		bpf.RetConstant{Val: retErrno | uint32(unix.EPERM)},
		bpf.RetConstant{Val: retAllow},
	)
	for _, nr := range deniedSyscalls() {
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: 1},
			bpf.RetConstant{Val: retErrno | uint32(unix.EPERM)},
		)
	}
	prog = append(prog, bpf.RetConstant{Val: retAllow})
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("assemble seccomp filter: %w", err)
	}
	// struct sock_filter { __u16 code; __u8 jt; __u8 jf; __u32 k; } in host order.
	out := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		out = binary.NativeEndian.AppendUint16(out, r.Op)
		out = append(out, r.Jt, r.Jf)
		out = binary.NativeEndian.AppendUint32(out, r.K)
	}
	return out, nil
}
