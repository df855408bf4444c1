package audit

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// mapSegment preallocates f to size bytes and maps it shared, so that
// Append copies records into the page cache without a system call. It
// returns nil, nil where the filesystem or the kernel refuses (the segment
// is then written with write(2)), and an error when the disk is full: the
// space is taken here, at the segment's creation, so that a copy into the
// mapping never meets a full disk (a SIGBUS).
func mapSegment(f *os.File, size int) ([]byte, error) {
	fd := int(f.Fd())
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil || !preallocates(int64(fs.Type)) {
		return nil, nil
	}
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil {
		if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
			return nil, err
		}
		return nil, nil
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		// Back to an empty file for write(2): records after zeros would
		// not read back.
		if err := f.Truncate(0); err != nil {
			return nil, err
		}
		return nil, nil
	}
	return mem, nil
}

// preallocates reports whether a filesystem keeps fallocate(2)'d blocks
// for writes through a mapping: ext4, XFS and tmpfs do. A copy-on-write
// filesystem (btrfs, ZFS) allocates anew on each write, so a full disk
// would be a SIGBUS in the middle of Append; such a journal uses write(2).
func preallocates(fsType int64) bool {
	switch fsType {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.TMPFS_MAGIC:
		return true
	}
	return false
}

func unmapSegment(mem []byte) { _ = unix.Munmap(mem) }

// populate faults mem in for writing (MADV_POPULATE_WRITE, Linux 5.14):
// the page cache pages are allocated and zeroed here, in the journal's
// background goroutine, rather than by the first copy into each page under
// the journal's mutex.
func populate(mem []byte) error { return unix.Madvise(mem, unix.MADV_POPULATE_WRITE) }

// dropPages unmaps written pages (their data stays in the page cache,
// dirty) before an fsync: writeback write-protects every page still
// mapped, one TLB shootdown each.
func dropPages(mem []byte) { _ = unix.Madvise(mem, unix.MADV_DONTNEED) }
