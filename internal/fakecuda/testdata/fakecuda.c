/*
 * fakecuda.c: a stand-in for libcuda.so.1 (the CUDA driver API) that psiflow's
 * tests build with cc and load instead of the real driver, so that the purego
 * binding in gpu/cuda is exercised on every machine, GPU or not.
 *
 * It implements the driver calls psiflow makes and is stricter than the real
 * driver. Every call is counted. Wrong use returns the driver's error code and,
 * where the real driver would not notice, is recorded as a violation that the
 * tests assert to be empty:
 *
 *   - handles: contexts, streams, events and device pointers must be live ones
 *     this library handed out (a destroyed or made-up handle is an error);
 *   - sizes: a copy must lie inside one allocation and, on the host side,
 *     inside one registration; allocations cannot exceed the device memory;
 *   - registration: overlapping registrations, unregistering memory that was
 *     not registered, an asynchronous copy from unregistered host memory, and
 *     unregistering or freeing memory a pending copy still uses;
 *   - threads and contexts: every call that needs a context needs it current on
 *     the calling OS thread (contexts are per thread), and a stream is used only
 *     from the thread that created it (psiflow's rule: each stream has a
 *     goroutine locked to its own thread);
 *   - asynchrony: a copy does not happen when it is enqueued but when its stream
 *     or an event after it is synchronized, so code that reuses a host buffer
 *     before the copy completed copies the wrong bytes (and the fake also
 *     notices that the host bytes changed while the copy was in flight);
 *     a synchronous device-to-host copy of device memory that a pending copy
 *     still writes is a violation (non-blocking streams do not synchronize with
 *     the legacy default stream);
 *   - teardown: releasing the primary context with allocations, registrations,
 *     streams or events still alive is a violation.
 *
 * The fakecuda_* functions at the end are for the tests only.
 *
 * Environment: FAKECUDA_DEVICES (default 1), FAKECUDA_MEM_BYTES (device memory,
 * default 1 GiB), read at cuInit.
 * Build flag: -DFAKECUDA_NO_HOST_REGISTER leaves cuMemHostRegister_v2 out (a
 * driver missing a symbol).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct fake_ctx *CUcontext;
typedef struct fake_stream *CUstream;
typedef struct fake_event *CUevent;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_DEINITIALIZED = 4,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_ILLEGAL_STATE = 401,
	CUDA_ERROR_NOT_READY = 600,
	CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
	CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
	CUDA_ERROR_NOT_SUPPORTED = 801,
	CUDA_ERROR_UNKNOWN = 999,
};

static const struct {
	int code;
	const char *name, *text;
} errors[] = {
	{CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
	{CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
	{CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation is not permitted in the current state"},
	{CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
	{CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
	{CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
	{CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	{CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

#define MAX_DEVICES 8
#define MAGIC_CTX 0x43545821u
#define MAGIC_STREAM 0x53545221u
#define MAGIC_EVENT 0x45564e21u
#define DEV_BASE 0x100000000000ull /* device addresses never look like host ones */

struct fake_ctx {
	unsigned magic;
	int device;
	int refs;
};

struct op {
	int kind; /* 0 copy, 1 record */
	/* copy */
	unsigned char *dst; /* device backing */
	CUdeviceptr ddst;
	const unsigned char *src;
	size_t n;
	uint64_t sum;
	/* record */
	struct fake_event *ev;
	unsigned long long seq;
};

struct fake_stream {
	unsigned magic;
	int live;
	struct fake_ctx *ctx;
	pid_t tid; /* the creating thread: the only one allowed to use it */
	struct op *ops;
	size_t nops, capops;
	struct fake_stream *next;
};

struct fake_event {
	unsigned magic;
	int live;
	int timing;
	struct fake_ctx *ctx;
	struct fake_stream *stream; /* of the last record */
	unsigned long long seq;     /* of the last record */
	int recorded, done;
	double ms; /* CLOCK_MONOTONIC when it completed */
	struct fake_event *next;
};

struct alloc {
	CUdeviceptr base;
	size_t size;
	unsigned char *mem;
	struct fake_ctx *ctx;
	int live;
};

struct reg {
	uintptr_t p;
	size_t n;
	int live;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static int ndevices = 1;
static size_t memtotal = (size_t)1 << 30;
static size_t memused;
static struct fake_ctx ctxs[MAX_DEVICES];
static __thread struct fake_ctx *current;

static struct alloc *allocs;
static size_t nallocs, capallocs;
static CUdeviceptr nextdev = DEV_BASE;
static struct reg *regs;
static size_t nregs, capregs __attribute__((unused));
static struct fake_stream *streams;
static struct fake_event *events;
static unsigned long long seqno;

static struct {
	char name[64];
	long long n;
} counts[128];
static int ncounts;
static long long totalcalls;

static char violations[1 << 16];
static size_t nviol;

static char failname[64];
static int failcode;

static pid_t tid(void) { return (pid_t)syscall(SYS_gettid); }

static double now_ms(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void violation(const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	if (nviol < sizeof violations - 2) {
		int k = vsnprintf(violations + nviol, sizeof violations - nviol - 1, fmt, ap);
		if (k > 0) {
			nviol += (size_t)k;
			if (nviol > sizeof violations - 2)
				nviol = sizeof violations - 2;
			violations[nviol++] = '\n';
			violations[nviol] = 0;
		}
	}
	va_end(ap);
}

/* enter counts the call and returns an injected failure code, or 0. Called with mu held. */
static int enter(const char *name) {
	totalcalls++;
	int i;
	for (i = 0; i < ncounts; i++)
		if (strcmp(counts[i].name, name) == 0)
			break;
	if (i == ncounts && ncounts < (int)(sizeof counts / sizeof counts[0])) {
		snprintf(counts[i].name, sizeof counts[i].name, "%s", name);
		ncounts++;
	}
	if (i < ncounts)
		counts[i].n++;
	if (failname[0] && strcmp(failname, name) == 0) {
		failname[0] = 0;
		return failcode;
	}
	return 0;
}

#define ENTER(name)                  \
	pthread_mutex_lock(&mu);         \
	do {                             \
		int f_ = enter(name);        \
		if (f_) {                    \
			pthread_mutex_unlock(&mu); \
			return f_;               \
		}                            \
	} while (0)
#define RETURN(code)               \
	do {                           \
		int r_ = (code);           \
		pthread_mutex_unlock(&mu); \
		return r_;                 \
	} while (0)

/* needctx checks that the calling thread has a live context current. */
static int needctx(const char *call) {
	if (!initialized) {
		violation("%s before cuInit", call);
		return CUDA_ERROR_NOT_INITIALIZED;
	}
	if (current == NULL) {
		violation("%s on thread %d with no current context (contexts are per thread)", call, (int)tid());
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (current->magic != MAGIC_CTX || current->refs <= 0) {
		violation("%s on thread %d whose current context was released", call, (int)tid());
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	return 0;
}

static uint64_t checksum(const unsigned char *p, size_t n) {
	uint64_t h = 1469598103934665603ull;
	size_t i = 0;
	/* 8 bytes at a time, then the tail: FNV-1a over words. */
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = (h ^ w) * 1099511628211ull;
	}
	for (; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static struct fake_stream *findstream(CUstream s) {
	for (struct fake_stream *x = streams; x; x = x->next)
		if (x == s && x->magic == MAGIC_STREAM && x->live)
			return x;
	return NULL;
}

static struct fake_event *findevent(CUevent e) {
	for (struct fake_event *x = events; x; x = x->next)
		if (x == e && x->magic == MAGIC_EVENT && x->live)
			return x;
	return NULL;
}

static struct alloc *findalloc(CUdeviceptr p, size_t n) {
	for (size_t i = 0; i < nallocs; i++) {
		struct alloc *a = &allocs[i];
		if (a->live && p >= a->base && p < a->base + a->size)
			return (n <= a->size - (p - a->base)) ? a : NULL;
	}
	return NULL;
}

static struct reg *findreg(const void *p, size_t n) {
	uintptr_t lo = (uintptr_t)p;
	for (size_t i = 0; i < nregs; i++) {
		struct reg *r = &regs[i];
		if (r->live && lo >= r->p && lo < r->p + r->n)
			return (n <= r->n - (lo - r->p)) ? r : NULL;
	}
	return NULL;
}

/* flush runs the stream's pending operations up to and including sequence upto (all for 0). */
static void flush(struct fake_stream *s, unsigned long long upto) {
	size_t k = 0;
	for (; k < s->nops; k++) {
		struct op *o = &s->ops[k];
		if (upto && o->seq > upto)
			break;
		if (o->kind == 0) {
			if (checksum(o->src, o->n) != o->sum)
				violation("cuMemcpyHtoDAsync_v2 of %zu bytes from %p: the host bytes changed while the copy was in flight (reused before the copy completed)", o->n, (const void *)o->src);
			memcpy(o->dst, o->src, o->n);
		} else {
			o->ev->done = 1;
			o->ev->ms = now_ms();
		}
	}
	memmove(s->ops, s->ops + k, (s->nops - k) * sizeof s->ops[0]);
	s->nops -= k;
}

static int pending_on_device(CUdeviceptr lo, size_t n) {
	for (struct fake_stream *s = streams; s; s = s->next)
		for (size_t k = 0; k < s->nops; k++) {
			struct op *o = &s->ops[k];
			if (o->kind == 0 && o->ddst < lo + n && lo < o->ddst + o->n)
				return 1;
		}
	return 0;
}

static int pending_on_host(uintptr_t lo, size_t n) {
	for (struct fake_stream *s = streams; s; s = s->next)
		for (size_t k = 0; k < s->nops; k++) {
			struct op *o = &s->ops[k];
			if (o->kind == 0 && (uintptr_t)o->src < lo + n && lo < (uintptr_t)o->src + o->n)
				return 1;
		}
	return 0;
}

static int ownstream(struct fake_stream *s, const char *call) {
	if (s->tid != tid()) {
		violation("%s: stream %p created on thread %d used from thread %d (each stream belongs to one locked thread)", call, (void *)s, (int)s->tid, (int)tid());
	}
	if (s->ctx != current) {
		violation("%s: stream %p belongs to another context", call, (void *)s);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	return 0;
}

static void readenv(void) {
	const char *d = getenv("FAKECUDA_DEVICES");
	ndevices = d ? atoi(d) : 1;
	if (ndevices < 0)
		ndevices = 0;
	if (ndevices > MAX_DEVICES)
		ndevices = MAX_DEVICES;
	const char *m = getenv("FAKECUDA_MEM_BYTES");
	if (m)
		memtotal = (size_t)strtoull(m, NULL, 10);
}

/* ---- the driver API ---- */

CUresult cuInit(unsigned int flags) {
	ENTER("cuInit");
	if (flags != 0)
		RETURN(CUDA_ERROR_INVALID_VALUE);
	if (!initialized)
		readenv();
	initialized = 1;
	if (ndevices == 0)
		RETURN(CUDA_ERROR_NO_DEVICE);
	RETURN(CUDA_SUCCESS);
}

CUresult cuDriverGetVersion(int *v) {
	ENTER("cuDriverGetVersion");
	if (!v)
		RETURN(CUDA_ERROR_INVALID_VALUE);
	*v = 13000;
	RETURN(CUDA_SUCCESS);
}

CUresult cuDeviceGetCount(int *n) {
	ENTER("cuDeviceGetCount");
	if (!initialized)
		RETURN(CUDA_ERROR_NOT_INITIALIZED);
	if (!n)
		RETURN(CUDA_ERROR_INVALID_VALUE);
	*n = ndevices;
	RETURN(CUDA_SUCCESS);
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	ENTER("cuDeviceGet");
	if (!initialized)
		RETURN(CUDA_ERROR_NOT_INITIALIZED);
	if (!d)
		RETURN(CUDA_ERROR_INVALID_VALUE);
	if (ordinal < 0 || ordinal >= ndevices)
		RETURN(CUDA_ERROR_INVALID_DEVICE);
	*d = ordinal;
	RETURN(CUDA_SUCCESS);
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	ENTER("cuDeviceGetName");
	if (!initialized)
		RETURN(CUDA_ERROR_NOT_INITIALIZED);
	if (!name || len <= 0)
		RETURN(CUDA_ERROR_INVALID_VALUE);
	if (d < 0 || d >= ndevices)
		RETURN(CUDA_ERROR_INVALID_DEVICE);
	snprintf(name, (size_t)len, "psiflow fake CUDA device %d", d);
	RETURN(CUDA_SUCCESS);
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
	ENTER("cuDeviceTotalMem_v2");
	if (!initialized)
		RETURN(CUDA_ERROR_NOT_INITIALIZED);
	if (!bytes)
		RETURN(CUDA_ERROR_INVALID_VALUE);
	if (d < 0 || d >= ndevices)
		RETURN(CUDA_ERROR_INVALID_DEVICE);
	*bytes = memtotal;
	RETURN(CUDA_SUCCESS);
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice d) {
	ENTER("cuDevicePrimaryCtxRetain");
	if (!initialized)
		RETURN(CUDA_ERROR_NOT_INITIALIZED);
	if (!pctx)
		RETURN(CUDA_ERROR_INVALID_VALUE);
	if (d < 0 || d >= ndevices)
		RETURN(CUDA_ERROR_INVALID_DEVICE);
	ctxs[d].magic = MAGIC_CTX;
	ctxs[d].device = d;
	ctxs[d].refs++;
	*pctx = &ctxs[d];
	RETURN(CUDA_SUCCESS);
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
	ENTER("cuDevicePrimaryCtxRelease_v2");
	if (!initialized)
		RETURN(CUDA_ERROR_NOT_INITIALIZED);
	if (d < 0 || d >= ndevices)
		RETURN(CUDA_ERROR_INVALID_DEVICE);
	if (ctxs[d].refs <= 0) {
		violation("cuDevicePrimaryCtxRelease_v2(%d) without a retain", d);
		RETURN(CUDA_ERROR_INVALID_CONTEXT);
	}
	if (--ctxs[d].refs == 0) {
		size_t na = 0, nr = 0, ns = 0, ne = 0;
		for (size_t i = 0; i < nallocs; i++)
			na += allocs[i].live && allocs[i].ctx == &ctxs[d];
		for (size_t i = 0; i < nregs; i++)
			nr += regs[i].live;
		for (struct fake_stream *s = streams; s; s = s->next)
			ns += s->live && s->ctx == &ctxs[d];
		for (struct fake_event *e = events; e; e = e->next)
			ne += e->live && e->ctx == &ctxs[d];
		if (na + nr + ns + ne)
			violation("primary context of device %d released with %zu allocations, %zu registrations, %zu streams and %zu events alive", d, na, nr, ns, ne);
	}
	RETURN(CUDA_SUCCESS);
}

CUresult cuCtxSetCurrent(CUcontext c) {
	ENTER("cuCtxSetCurrent");
	if (!initialized)
		RETURN(CUDA_ERROR_NOT_INITIALIZED);
	if (c != NULL && (c->magic != MAGIC_CTX || c->refs <= 0)) {
		violation("cuCtxSetCurrent(%p): not a retained context", (void *)c);
		RETURN(CUDA_ERROR_INVALID_CONTEXT);
	}
	current = c;
	RETURN(CUDA_SUCCESS);
}

CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
	ENTER("cuMemGetInfo_v2");
	int e = needctx("cuMemGetInfo_v2");
	if (e)
		RETURN(e);
	if (!free || !total)
		RETURN(CUDA_ERROR_INVALID_VALUE);
	*free = memtotal - memused;
	*total = memtotal;
	RETURN(CUDA_SUCCESS);
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
	ENTER("cuMemAlloc_v2");
	int e = needctx("cuMemAlloc_v2");
	if (e)
		RETURN(e);
	if (!p || n == 0)
		RETURN(CUDA_ERROR_INVALID_VALUE);
	size_t rounded = (n + 255) & ~(size_t)255;
	if (rounded > memtotal - memused)
		RETURN(CUDA_ERROR_OUT_OF_MEMORY);
	unsigned char *mem = calloc(1, rounded);
	if (!mem)
		RETURN(CUDA_ERROR_OUT_OF_MEMORY);
	if (nallocs == capallocs) {
		capallocs = capallocs ? 2 * capallocs : 64;
		allocs = realloc(allocs, capallocs * sizeof allocs[0]);
	}
	allocs[nallocs++] = (struct alloc){nextdev, n, mem, current, 1};
	*p = nextdev;
	nextdev += rounded + 4096; /* a gap: an overrun lands outside any allocation */
	memused += rounded;
	RETURN(CUDA_SUCCESS);
}

CUresult cuMemFree_v2(CUdeviceptr p) {
	ENTER("cuMemFree_v2");
	int e = needctx("cuMemFree_v2");
	if (e)
		RETURN(e);
	for (size_t i = 0; i < nallocs; i++) {
		struct alloc *a = &allocs[i];
		if (a->live && a->base == p) {
			if (pending_on_device(a->base, a->size))
				violation("cuMemFree_v2(%#llx): a pending copy still writes it", p);
			a->live = 0;
			free(a->mem);
			a->mem = NULL;
			memused -= (a->size + 255) & ~(size_t)255;
			RETURN(CUDA_SUCCESS);
		}
	}
	violation("cuMemFree_v2(%#llx): not an allocation", p);
	RETURN(CUDA_ERROR_INVALID_VALUE);
}

#ifndef FAKECUDA_NO_HOST_REGISTER
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned int flags) {
	ENTER("cuMemHostRegister_v2");
	int e = needctx("cuMemHostRegister_v2");
	if (e)
		RETURN(e);
	if (!p || n == 0 || (flags & ~0xfu)) {
		violation("cuMemHostRegister_v2(%p, %zu, %#x): invalid", p, n, flags);
		RETURN(CUDA_ERROR_INVALID_VALUE);
	}
	uintptr_t lo = (uintptr_t)p;
	for (size_t i = 0; i < nregs; i++)
		if (regs[i].live && lo < regs[i].p + regs[i].n && regs[i].p < lo + n) {
			violation("cuMemHostRegister_v2(%p, %zu): overlaps a registration", p, n);
			RETURN(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
		}
	/* Touch every page as the driver's pinning would (a bad pointer crashes here, loudly). */
	volatile const unsigned char *q = p;
	unsigned char sink = 0;
	for (size_t off = 0; off < n; off += 4096)
		sink ^= q[off];
	(void)sink;
	if (nregs == capregs) {
		capregs = capregs ? 2 * capregs : 64;
		regs = realloc(regs, capregs * sizeof regs[0]);
	}
	regs[nregs++] = (struct reg){lo, n, 1};
	RETURN(CUDA_SUCCESS);
}
#endif

CUresult cuMemHostUnregister(void *p) {
	ENTER("cuMemHostUnregister");
	int e = needctx("cuMemHostUnregister");
	if (e)
		RETURN(e);
	for (size_t i = 0; i < nregs; i++)
		if (regs[i].live && regs[i].p == (uintptr_t)p) {
			if (pending_on_host(regs[i].p, regs[i].n))
				violation("cuMemHostUnregister(%p): a pending copy still reads it", p);
			regs[i].live = 0;
			RETURN(CUDA_SUCCESS);
		}
	violation("cuMemHostUnregister(%p): not the start of a registration", p);
	RETURN(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
}

CUresult cuStreamCreate(CUstream *ps, unsigned int flags) {
	ENTER("cuStreamCreate");
	int e = needctx("cuStreamCreate");
	if (e)
		RETURN(e);
	if (!ps || flags > 1)
		RETURN(CUDA_ERROR_INVALID_VALUE);
	struct fake_stream *s = calloc(1, sizeof *s);
	s->magic = MAGIC_STREAM;
	s->live = 1;
	s->ctx = current;
	s->tid = tid();
	s->next = streams;
	streams = s;
	*ps = s;
	RETURN(CUDA_SUCCESS);
}

CUresult cuStreamDestroy_v2(CUstream h) {
	ENTER("cuStreamDestroy_v2");
	int e = needctx("cuStreamDestroy_v2");
	if (e)
		RETURN(e);
	struct fake_stream *s = findstream(h);
	if (!s) {
		violation("cuStreamDestroy_v2(%p): not a live stream", (void *)h);
		RETURN(CUDA_ERROR_INVALID_HANDLE);
	}
	if ((e = ownstream(s, "cuStreamDestroy_v2")))
		RETURN(e);
	flush(s, 0); /* the real driver finishes the work, then frees the stream */
	s->live = 0;
	free(s->ops);
	s->ops = NULL;
	RETURN(CUDA_SUCCESS);
}

CUresult cuStreamSynchronize(CUstream h) {
	ENTER("cuStreamSynchronize");
	int e = needctx("cuStreamSynchronize");
	if (e)
		RETURN(e);
	struct fake_stream *s = findstream(h);
	if (!s) {
		violation("cuStreamSynchronize(%p): not a live stream (psiflow never uses the default stream)", (void *)h);
		RETURN(CUDA_ERROR_INVALID_HANDLE);
	}
	if ((e = ownstream(s, "cuStreamSynchronize")))
		RETURN(e);
	flush(s, 0);
	RETURN(CUDA_SUCCESS);
}

static void push(struct fake_stream *s, struct op o) {
	if (s->nops == s->capops) {
		s->capops = s->capops ? 2 * s->capops : 16;
		s->ops = realloc(s->ops, s->capops * sizeof s->ops[0]);
	}
	s->ops[s->nops++] = o;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream h) {
	ENTER("cuMemcpyHtoDAsync_v2");
	int e = needctx("cuMemcpyHtoDAsync_v2");
	if (e)
		RETURN(e);
	struct fake_stream *s = findstream(h);
	if (!s) {
		violation("cuMemcpyHtoDAsync_v2: stream %p is not a live stream (psiflow never uses the default stream)", (void *)h);
		RETURN(CUDA_ERROR_INVALID_HANDLE);
	}
	if ((e = ownstream(s, "cuMemcpyHtoDAsync_v2")))
		RETURN(e);
	if (!src || n == 0) {
		violation("cuMemcpyHtoDAsync_v2(%#llx, %p, %zu): empty or null", dst, src, n);
		RETURN(CUDA_ERROR_INVALID_VALUE);
	}
	struct alloc *a = findalloc(dst, n);
	if (!a) {
		violation("cuMemcpyHtoDAsync_v2: device range [%#llx,+%zu) is not inside one allocation", dst, n);
		RETURN(CUDA_ERROR_INVALID_VALUE);
	}
	if (!findreg(src, n)) {
		violation("cuMemcpyHtoDAsync_v2: host range [%p,+%zu) is not inside one registration (an asynchronous copy from pageable memory)", src, n);
		RETURN(CUDA_ERROR_INVALID_VALUE);
	}
	struct op o = {0};
	o.kind = 0;
	o.dst = a->mem + (dst - a->base);
	o.ddst = dst;
	o.src = src;
	o.n = n;
	o.sum = checksum(src, n);
	o.seq = ++seqno;
	push(s, o);
	RETURN(CUDA_SUCCESS);
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	ENTER("cuMemcpyDtoH_v2");
	int e = needctx("cuMemcpyDtoH_v2");
	if (e)
		RETURN(e);
	if (!dst || n == 0)
		RETURN(CUDA_ERROR_INVALID_VALUE);
	struct alloc *a = findalloc(src, n);
	if (!a) {
		violation("cuMemcpyDtoH_v2: device range [%#llx,+%zu) is not inside one allocation", src, n);
		RETURN(CUDA_ERROR_INVALID_VALUE);
	}
	if (pending_on_device(src, n))
		violation("cuMemcpyDtoH_v2: device range [%#llx,+%zu) is still written by a pending copy on a non-blocking stream (synchronize first)", src, n);
	memcpy(dst, a->mem + (src - a->base), n);
	RETURN(CUDA_SUCCESS);
}

CUresult cuEventCreate(CUevent *pe, unsigned int flags) {
	ENTER("cuEventCreate");
	int e = needctx("cuEventCreate");
	if (e)
		RETURN(e);
	if (!pe || (flags & ~0x7u))
		RETURN(CUDA_ERROR_INVALID_VALUE);
	struct fake_event *ev = calloc(1, sizeof *ev);
	ev->magic = MAGIC_EVENT;
	ev->live = 1;
	ev->timing = !(flags & 2); /* CU_EVENT_DISABLE_TIMING */
	ev->ctx = current;
	ev->next = events;
	events = ev;
	*pe = ev;
	RETURN(CUDA_SUCCESS);
}

CUresult cuEventDestroy_v2(CUevent h) {
	ENTER("cuEventDestroy_v2");
	int e = needctx("cuEventDestroy_v2");
	if (e)
		RETURN(e);
	struct fake_event *ev = findevent(h);
	if (!ev) {
		violation("cuEventDestroy_v2(%p): not a live event", (void *)h);
		RETURN(CUDA_ERROR_INVALID_HANDLE);
	}
	ev->live = 0;
	RETURN(CUDA_SUCCESS);
}

CUresult cuEventRecord(CUevent h, CUstream sh) {
	ENTER("cuEventRecord");
	int e = needctx("cuEventRecord");
	if (e)
		RETURN(e);
	struct fake_event *ev = findevent(h);
	struct fake_stream *s = findstream(sh);
	if (!ev || !s) {
		violation("cuEventRecord(%p, %p): not a live event and stream", (void *)h, (void *)sh);
		RETURN(CUDA_ERROR_INVALID_HANDLE);
	}
	if ((e = ownstream(s, "cuEventRecord")))
		RETURN(e);
	struct op o = {0};
	o.kind = 1;
	o.ev = ev;
	o.seq = ++seqno;
	ev->stream = s;
	ev->seq = o.seq;
	ev->recorded = 1;
	ev->done = 0;
	push(s, o);
	RETURN(CUDA_SUCCESS);
}

CUresult cuEventSynchronize(CUevent h) {
	ENTER("cuEventSynchronize");
	int e = needctx("cuEventSynchronize");
	if (e)
		RETURN(e);
	struct fake_event *ev = findevent(h);
	if (!ev) {
		violation("cuEventSynchronize(%p): not a live event", (void *)h);
		RETURN(CUDA_ERROR_INVALID_HANDLE);
	}
	if (ev->recorded && !ev->done) {
		if (!findstream(ev->stream)) {
			violation("cuEventSynchronize: the event's stream was destroyed");
			RETURN(CUDA_ERROR_ILLEGAL_STATE);
		}
		flush(ev->stream, ev->seq);
	}
	RETURN(CUDA_SUCCESS);
}

CUresult cuEventQuery(CUevent h) {
	ENTER("cuEventQuery");
	int e = needctx("cuEventQuery");
	if (e)
		RETURN(e);
	struct fake_event *ev = findevent(h);
	if (!ev)
		RETURN(CUDA_ERROR_INVALID_HANDLE);
	RETURN(ev->recorded && !ev->done ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS);
}

CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
	ENTER("cuEventElapsedTime");
	int e = needctx("cuEventElapsedTime");
	if (e)
		RETURN(e);
	struct fake_event *a = findevent(start), *b = findevent(end);
	if (!ms || !a || !b)
		RETURN(CUDA_ERROR_INVALID_HANDLE);
	if (!a->timing || !b->timing)
		RETURN(CUDA_ERROR_INVALID_HANDLE);
	if (!a->done || !b->done)
		RETURN(CUDA_ERROR_NOT_READY);
	*ms = (float)(b->ms - a->ms);
	RETURN(CUDA_SUCCESS);
}

CUresult cuGetErrorString(CUresult code, const char **s) {
	/* Not counted: error reporting is not part of a copy's call budget. */
	if (!s)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
		if (errors[i].code == code) {
			*s = errors[i].text;
			return CUDA_SUCCESS;
		}
	*s = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult code, const char **s) {
	if (!s)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
		if (errors[i].code == code) {
			*s = errors[i].name;
			return CUDA_SUCCESS;
		}
	*s = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- for the tests only ---- */

/* fakecuda_calls returns how often name was called ("" or NULL: all calls). */
long long fakecuda_calls(const char *name) {
	pthread_mutex_lock(&mu);
	long long n = 0;
	if (!name || !*name)
		n = totalcalls;
	else
		for (int i = 0; i < ncounts; i++)
			if (strcmp(counts[i].name, name) == 0)
				n = counts[i].n;
	pthread_mutex_unlock(&mu);
	return n;
}

/* fakecuda_take_violations copies the violations recorded so far into buf (NUL-terminated), clears them and returns their length. */
int fakecuda_take_violations(char *buf, int cap) {
	pthread_mutex_lock(&mu);
	int n = (int)nviol;
	if (cap > 0) {
		int k = n < cap - 1 ? n : cap - 1;
		memcpy(buf, violations, (size_t)k);
		buf[k] = 0;
	}
	nviol = 0;
	violations[0] = 0;
	pthread_mutex_unlock(&mu);
	return n;
}

/* fakecuda_fail makes the next call of name return code. */
void fakecuda_fail(const char *name, int code) {
	pthread_mutex_lock(&mu);
	snprintf(failname, sizeof failname, "%s", name);
	failcode = code;
	pthread_mutex_unlock(&mu);
}

/* fakecuda_live counts live objects: "alloc", "reg", "stream", "event", "ctxref", "pending" (queued operations). */
long long fakecuda_live(const char *what) {
	pthread_mutex_lock(&mu);
	long long n = 0;
	if (strcmp(what, "alloc") == 0) {
		for (size_t i = 0; i < nallocs; i++)
			n += allocs[i].live;
	} else if (strcmp(what, "reg") == 0) {
		for (size_t i = 0; i < nregs; i++)
			n += regs[i].live;
	} else if (strcmp(what, "stream") == 0) {
		for (struct fake_stream *s = streams; s; s = s->next)
			n += s->live;
	} else if (strcmp(what, "event") == 0) {
		for (struct fake_event *e = events; e; e = e->next)
			n += e->live;
	} else if (strcmp(what, "ctxref") == 0) {
		for (int d = 0; d < MAX_DEVICES; d++)
			n += ctxs[d].refs;
	} else if (strcmp(what, "pending") == 0) {
		for (struct fake_stream *s = streams; s; s = s->next)
			n += (long long)s->nops;
	} else {
		n = -1;
	}
	pthread_mutex_unlock(&mu);
	return n;
}

/* fakecuda_raw_call calls a context-needing entry point on the calling thread, whatever its context (for testing the fake's own rules). */
long long fakecuda_memgetinfo_here(void) {
	size_t f = 0, t = 0;
	int r = cuMemGetInfo_v2(&f, &t);
	return r;
}
