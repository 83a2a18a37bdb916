package sessionlog

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// The harness writes its logs zstd-compressed by default (session.jsonl.zstd): one zstd frame
// per flushed batch, so a file holds many frames. Import detects compression by the frame
// magic, not the file name, since it reads a stream.
var (
	zstdMagic          = []byte{0x28, 0xb5, 0x2f, 0xfd}
	zstdSkippableMagic = []byte{0x2a, 0x4d, 0x18} // bytes 1..3 of 0x184D2A50..0x184D2A5F
)

// isZstd reports whether head (the first four bytes of a stream) starts a zstd frame or a
// skippable frame.
func isZstd(head []byte) bool {
	if len(head) < 4 {
		return false
	}
	return bytes.Equal(head, zstdMagic) || (head[0]&0xf0 == 0x50 && bytes.Equal(head[1:4], zstdSkippableMagic))
}

// plainJSONL returns a reader of r's JSONL text, decompressing it when it is zstd (every
// frame, in order). close releases the decoder.
func plainJSONL(r io.Reader) (out io.Reader, closeFn func(), err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, _ := br.Peek(4) // a short or failing peek is plain text; the reader reports the error
	if !isZstd(head) {
		return br, func() {}, nil
	}
	// One goroutine: a log is read once, front to back.
	dec, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, nil, fmt.Errorf("import: open zstd stream: %w", err)
	}
	return dec, dec.Close, nil
}
