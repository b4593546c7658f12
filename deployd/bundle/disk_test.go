package bundle

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestOnDisk: a release's size is counted as the file system stores it once the
// block size is known (each file in whole blocks, each directory one block), and its
// inodes are its files, its directories, the release directory and its .env.
func TestOnDisk(t *testing.T) {
	files := []fileSum{{path: "manifest.json", size: 300}, {path: "compose.yaml", size: 5000}, {path: "conf/a/x", size: 1}, {path: "conf/b", size: 0}}
	for _, c := range []struct {
		name             string
		blockSize        int64
		bytes, inodeWant int64
	}{
		{"bytes", 0, 5301, 8},
		{"4 KiB blocks", 4096, (1 + 2 + 1 + 0 + 3) * 4096, 8},
		{"512 B blocks", 512, (1 + 10 + 1 + 0 + 3) * 512, 8},
	} {
		b, n := onDisk(files, c.blockSize)
		assert.Equal(t, c.bytes, b, c.name)
		assert.Equal(t, c.inodeWant, n, c.name)
	}
}

// TestDiskLowCountsBlocksAndInodes: 2000 one-byte files pass a byte count with 1 MiB
// free, but take 2000 blocks (8 MiB in 4 KiB blocks) and 2000 inodes: DISK_LOW
// names the MiB and the inodes before the lease, instead of a staging that fails
// after it.
func TestDiskLowCountsBlocksAndInodes(t *testing.T) {
	files := make([]fileSum, 2000)
	for i := range files {
		files[i] = fileSum{path: "f/" + string(rune('a'+i%26)) + "/" + strconv.Itoa(i), size: 1}
	}
	m := &Manifest{}
	for _, c := range []struct {
		name   string
		disk   Disk
		refuse []string
	}{
		{"bytes only: passes", Disk{FreeMB: 1}, nil},
		{"blocks: refused", Disk{FreeMB: 1, BlockSize: 4096}, []string{"1 MiB free under deploy_dir, the release needs 16 MiB"}},
		{"blocks with room", Disk{FreeMB: 16, BlockSize: 4096}, nil},
		{"inodes: refused", Disk{FreeMB: 100, BlockSize: 4096, FreeInodes: 3000, TotalInodes: 100000}, []string{"3000 inodes free under deploy_dir, the release needs 4058 (twice its 2029 files and directories)"}},
		{"inodes not counted", Disk{FreeMB: 100, BlockSize: 4096, FreeInodes: 0, TotalInodes: 0}, nil},
		{"inodes with room", Disk{FreeMB: 100, BlockSize: 4096, FreeInodes: 5000, TotalInodes: 100000}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var rs refusals
			checkDisk(m, c.disk, files, &rs)
			var got []string
			for _, r := range rs.list {
				assert.Equal(t, "DISK_LOW", string(r.Code))
				got = append(got, r.Detail)
			}
			if c.refuse == nil {
				assert.Empty(t, got)
				return
			}
			assert.Len(t, got, len(c.refuse))
			for i := range c.refuse {
				assert.Contains(t, got[i], c.refuse[i])
			}
		})
	}
}
