//go:build linux && cgo

package dl

/*
#cgo LDFLAGS: -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <stdint.h>

static void* goccl_dlopen(const char* path, int global) {
	return dlopen(path, RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
}

static uintptr_t goccl_dlsym(void* h, const char* name) {
	dlerror();
	return (uintptr_t)dlsym(h, name);
}

// goccl_dlpath returns the file the dynamic linker actually loaded for h.
static const char* goccl_dlpath(void* h) {
	struct link_map* lm = 0;
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || lm == 0) return 0;
	return lm->l_name;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"github.com/goccl/goccl/transport"
)

// Lib is an opened shared library.
type Lib struct {
	h    unsafe.Pointer
	path string
	from string
}

// Supported reports whether this build can load libraries (linux with cgo).
const Supported = true

// Open tries s.Candidates in order and returns the first library that loads. The error,
// when none does, wraps transport.ErrNotSupported and names every attempt.
func Open(s Spec) (*Lib, error) {
	cands := s.Candidates()
	var tried []string
	for _, c := range cands {
		l, err := openPath(c.Path, s.Global)
		if err == nil {
			l.from = c.From
			return l, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%s): %v", c.Path, c.From, err))
	}
	if len(tried) == 0 {
		tried = append(tried, "no candidate files")
	}
	return nil, fmt.Errorf("dl: %w: %s not found; searched %s; tried: %s",
		transport.ErrNotSupported, s.Name, s.Searched(), strings.Join(tried, "; "))
}

func openPath(path string, global bool) (*Lib, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	g := C.int(0)
	if global {
		g = 1
	}
	h := C.goccl_dlopen(cs, g)
	if h == nil {
		return nil, fmt.Errorf("%s", strings.TrimSpace(C.GoString(C.dlerror())))
	}
	l := &Lib{h: h, path: path}
	if p := C.goccl_dlpath(h); p != nil {
		if s := C.GoString(p); s != "" {
			l.path = s
		}
	}
	return l, nil
}

// Path is the file the dynamic linker loaded (resolved from a soname when it can be).
func (l *Lib) Path() string { return l.path }

// From says which search step found the library.
func (l *Lib) From() string { return l.from }

// Sym returns the address of a symbol, or an error wrapping ErrNotSupported.
func (l *Lib) Sym(name string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	p := C.goccl_dlsym(l.h, cs)
	if p == 0 {
		msg := "symbol not found"
		if e := C.dlerror(); e != nil {
			msg = C.GoString(e)
		}
		return 0, fmt.Errorf("dl: %w: %s in %s: %s", transport.ErrNotSupported, name, l.path, msg)
	}
	return uintptr(p), nil
}

// Syms resolves each name into the matching pointer. Required names that are missing
// make it fail; optional ones are left 0 (features of newer library versions).
func (l *Lib) Syms(required map[string]*uintptr, optional map[string]*uintptr) error {
	var missing []string
	for name, dst := range required {
		p, err := l.Sym(name)
		if err != nil {
			missing = append(missing, name)
			continue
		}
		*dst = p
	}
	for name, dst := range optional {
		if p, err := l.Sym(name); err == nil {
			*dst = p
		}
	}
	if len(missing) > 0 {
		sortStrings(missing)
		return fmt.Errorf("dl: %w: %s lacks required symbols %s (library too old or not the right one)",
			transport.ErrNotSupported, l.path, strings.Join(missing, ", "))
	}
	return nil
}

// Close unloads the library. Callers normally keep libraries for the process lifetime.
func (l *Lib) Close() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if C.dlclose(l.h) != 0 {
		return fmt.Errorf("dl: close %s: %s", l.path, C.GoString(C.dlerror()))
	}
	return nil
}
