package bundle

// Limits bounds what reading a bundle may cost. A zero field means its default;
// a negative field is treated as zero (the default). Passing a limit is
// BUNDLE_MALFORMED and is detected while streaming, before the bytes that pass it are
// read: a gzip bomb stops as soon as the running total passes MaxTotalSize, and
// nothing is ever unpacked into memory except the small files listed below.
type Limits struct {
	// MaxEntries bounds the number of tar entries (files, directories and any other
	// entry). Default 10 000.
	MaxEntries int
	// MaxFileSize bounds the size of one regular file. Default 1 GiB.
	MaxFileSize int64
	// MaxTotalSize bounds the sum of the sizes of all regular files (the unpacked
	// size). Default 4 GiB.
	MaxTotalSize int64
	// MaxManifestSize bounds manifest.json. Default 1 MiB.
	MaxManifestSize int64
	// MaxComposeFileSize bounds one compose file or env_file: files up to this size
	// are candidates to be kept in memory for the compose checks. Default 4 MiB.
	MaxComposeFileSize int64
	// MaxBufferSize bounds the memory spent on candidate files (compose files and
	// env_files) while the manifest is not yet known. Default 32 MiB.
	MaxBufferSize int64
	// MaxHeaderSize bounds the bytes of one entry's tar headers, PAX and GNU long
	// name records included. Default 64 KiB.
	MaxHeaderSize int64
}

// Default limits; see Limits.
const (
	DefaultMaxEntries         = 10_000
	DefaultMaxFileSize        = 1 << 30
	DefaultMaxTotalSize       = 4 << 30
	DefaultMaxManifestSize    = 1 << 20
	DefaultMaxComposeFileSize = 4 << 20
	DefaultMaxBufferSize      = 32 << 20
	DefaultMaxHeaderSize      = 64 << 10
)

// Fixed bounds that are not configurable: they follow from what a file system and
// the tar format can carry.
const (
	// maxPathLen is PATH_MAX: a longer path could never be extracted.
	maxPathLen = 4096
	// maxSegmentLen is NAME_MAX.
	maxSegmentLen = 255
	// maxTrailer bounds the zero padding after the tar end-of-archive marker
	// (tar's blocking factor pads to a record; 1 MiB allows -b 2048).
	maxTrailer = 1 << 20
)

// withDefaults returns l with every zero or negative field set to its default.
func (l Limits) withDefaults() Limits {
	orDefault(&l.MaxEntries, DefaultMaxEntries)
	orDefault(&l.MaxFileSize, DefaultMaxFileSize)
	orDefault(&l.MaxTotalSize, DefaultMaxTotalSize)
	orDefault(&l.MaxManifestSize, DefaultMaxManifestSize)
	orDefault(&l.MaxComposeFileSize, DefaultMaxComposeFileSize)
	orDefault(&l.MaxBufferSize, DefaultMaxBufferSize)
	orDefault(&l.MaxHeaderSize, DefaultMaxHeaderSize)
	return l
}

// orDefault sets *v to def when it is zero or negative.
func orDefault[T int | int64](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// streamCap bounds the decompressed bytes read from the stream: file data, at most
// one block of padding and MaxHeaderSize of headers per entry, the end marker and
// the trailer. It is what stops a stream of nothing but headers or padding.
func (l Limits) streamCap() int64 {
	c := satAdd(l.MaxTotalSize, satMul(int64(l.MaxEntries), satAdd(l.MaxHeaderSize, 1024)))
	return satAdd(c, 1024+maxTrailer)
}

const maxInt64 = int64(^uint64(0) >> 1)

// satAdd adds two non-negative numbers, saturating at the largest int64.
func satAdd(a, b int64) int64 {
	if a > maxInt64-b {
		return maxInt64
	}
	return a + b
}

// satMul multiplies two non-negative numbers, saturating at the largest int64.
func satMul(a, b int64) int64 {
	if a != 0 && b > maxInt64/a {
		return maxInt64
	}
	return a * b
}
