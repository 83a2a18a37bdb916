package framework

import (
	"strings"
	"sync"
)

// SyncBuffer collects a child process's output while a test or benchmark reads it: the process
// writes from exec's copying goroutine, the reader from its own.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
