package kernels

import (
	"fmt"
	"strings"

	"github.com/goccl/goccl/transport"
)

// Param is one kernel parameter: its name and C type.
type Param struct {
	Name, Type string
}

// Kernel is one generated extern "C" __global__ function.
type Kernel struct {
	Name   string
	Params []Param
	body   string // the statements inside the grid-stride loop (or the whole body when raw)
	raw    bool   // body is not wrapped in the element loop
}

// Group is a set of kernels compiled together into one module.
type Group int

// The kernel groups: what training needs (casts, the overflow check, AdamW, the
// example model's element-wise steps), and the reductions of goccl's own algorithms on
// device buffers (every dtype x op).
const (
	Training Group = iota
	Reductions
)

func (g Group) String() string {
	switch g {
	case Training:
		return "training"
	case Reductions:
		return "reductions"
	}
	return fmt.Sprintf("Group(%d)", int(g))
}

// ctype is the C type of each dtype on the device; float16 and bfloat16 travel as
// their 16-bit patterns, so the kernels need no cuda_fp16.h (and no -I at run time).
var ctype = map[transport.DType]string{
	transport.Int8: "signed char", transport.Uint8: "unsigned char", transport.Int32: "int",
	transport.Uint32: "unsigned int", transport.Int64: "long long", transport.Uint64: "unsigned long long",
	transport.Float16: "unsigned short", transport.BFloat16: "unsigned short",
	transport.Float32: "float", transport.Float64: "double",
}

// uctype is the unsigned type signed integers wrap through (signed overflow is
// undefined in C++; NCCL's and Go's integer sums wrap).
var uctype = map[transport.DType]string{
	transport.Int8: "unsigned char", transport.Int32: "unsigned int", transport.Int64: "unsigned long long",
}

// short names used in kernel names.
var short = map[transport.DType]string{
	transport.Int8: "i8", transport.Uint8: "u8", transport.Int32: "i32", transport.Uint32: "u32",
	transport.Int64: "i64", transport.Uint64: "u64", transport.Float16: "f16", transport.BFloat16: "bf16",
	transport.Float32: "f32", transport.Float64: "f64",
}

// AllTypes are the dtypes in NCCL's numbering order.
var AllTypes = []transport.DType{transport.Int8, transport.Uint8, transport.Int32, transport.Uint32, transport.Int64,
	transport.Uint64, transport.Float16, transport.Float32, transport.Float64, transport.BFloat16}

// WorkingTypes are the float types training keeps parameters and gradients in.
var WorkingTypes = []transport.DType{transport.Float32, transport.Float16, transport.BFloat16}

// ReduceOps are the element-wise combining ops (Avg combines as Sum, then Avg divides).
var ReduceOps = []transport.Op{transport.Sum, transport.Prod, transport.Max, transport.Min}

func isHalf(dt transport.DType) bool { return dt == transport.Float16 || dt == transport.BFloat16 }

func isFloat(dt transport.DType) bool {
	return dt == transport.Float32 || dt == transport.Float64 || isHalf(dt)
}

// load widens element expression e of dt to float (dt a working type).
func load(dt transport.DType, e string) string {
	switch dt {
	case transport.Float16:
		return "goccl_f16_to_f32(" + e + ")"
	case transport.BFloat16:
		return "goccl_bf16_to_f32(" + e + ")"
	}
	return e
}

// store rounds float expression e to dt.
func store(dt transport.DType, e string) string {
	switch dt {
	case transport.Float16:
		return "goccl_f32_to_f16(" + e + ")"
	case transport.BFloat16:
		return "goccl_f32_to_bf16(" + e + ")"
	}
	return e
}

func ptr(dt transport.DType) string { return ctype[dt] + "*" }

// CastName, NonFiniteName, ... are the kernels' names, for Set's lookups and tests.
func CastName(dst, src transport.DType) string { return "goccl_cast_" + short[src] + "_" + short[dst] }
func NonFiniteName(dt transport.DType) string  { return "goccl_nonfinite_" + short[dt] }
func ScaleCheckName(dt transport.DType) string {
	return "goccl_scale_check_" + short[dt]
}
func AdamWName(grad, param transport.DType, aliased bool) string {
	p := "none"
	if !aliased {
		p = short[param]
	}
	return "goccl_adamw_" + short[grad] + "_" + p
}
func ReduceName(dt transport.DType, op transport.Op) string {
	return "goccl_reduce_" + strings.ToLower(op.String()) + "_" + short[dt]
}
func AvgName(dt transport.DType) string { return "goccl_avg_" + short[dt] }

// Kernels returns the group's kernels in a fixed order.
func Kernels(g Group) []Kernel {
	switch g {
	case Training:
		return trainingKernels()
	case Reductions:
		return reductionKernels()
	}
	return nil
}

func trainingKernels() []Kernel {
	var ks []Kernel
	for _, st := range WorkingTypes {
		for _, dt := range WorkingTypes {
			ks = append(ks, Kernel{Name: CastName(dt, st),
				Params: []Param{{"dst", ptr(dt)}, {"src", "const " + ptr(st)}, {"n", "long long"}, {"scale", "float"}, {"accumulate", "int"}},
				// The same two steps as dp.Host.Cast: widen, then either dst + x*scale or x*scale.
				body: fmt.Sprintf("float x = %s * scale;\n\tif (accumulate) x = %s + x;\n\tdst[i] = %s;",
					load(st, "src[i]"), load(dt, "dst[i]"), store(dt, "x"))})
		}
	}
	for _, dt := range WorkingTypes {
		ks = append(ks, Kernel{Name: NonFiniteName(dt),
			Params: []Param{{"x", "const " + ptr(dt)}, {"n", "long long"}, {"flag", "int*"}},
			// Every thread that sees Inf or NaN stores the same 1: a benign race, no atomics.
			body: fmt.Sprintf("if (%s) *flag = 1;", nonFinite(dt, "x[i]"))})
	}
	for _, dt := range WorkingTypes {
		ks = append(ks, Kernel{Name: ScaleCheckName(dt),
			Params: []Param{{"x", ptr(dt)}, {"n", "long long"}, {"scale", "float"}, {"flag", "int*"}},
			body:   fmt.Sprintf("if (%s) *flag = 1;\n\tx[i] = %s;", nonFinite(dt, "x[i]"), store(dt, load(dt, "x[i]")+" * scale"))})
	}
	for _, gt := range WorkingTypes {
		for _, pt := range []transport.DType{0, transport.Float16, transport.BFloat16} {
			aliased := pt == 0
			name := AdamWName(gt, pt, aliased)
			pc := "unsigned short*"
			write := ""
			if !aliased {
				write = "\n\tparam[i] = " + store(pt, "w") + ";"
			}
			ks = append(ks, Kernel{Name: name,
				Params: []Param{{"master", "float*"}, {"m", "float*"}, {"v", "float*"}, {"grad", "const " + ptr(gt)},
					{"param", pc}, {"n", "long long"}, {"gscale", "float"}, {"lr", "float"}, {"b1", "float"},
					{"b2", "float"}, {"eps", "float"}, {"decay", "float"}, {"c1", "float"}, {"c2", "float"}},
				// Operation for operation optim.AdamW.Step, so with --fmad=false the
				// device and the host agree bit for bit.
				body: "float gi = " + load(gt, "grad[i]") + " * gscale;\n" +
					"\tfloat mi = b1 * m[i] + (1.0f - b1) * gi;\n" +
					"\tfloat vi = b2 * v[i] + (1.0f - b2) * gi * gi;\n" +
					"\tm[i] = mi;\n\tv[i] = vi;\n" +
					"\tfloat den = (float)sqrt((double)(vi / c2)) + eps;\n" +
					"\tfloat w = master[i] * decay - lr * (mi / c1) / den;\n" +
					"\tmaster[i] = w;" + write})
		}
	}
	ks = append(ks, modelKernels()...)
	return ks
}

func nonFinite(dt transport.DType, e string) string {
	switch dt {
	case transport.Float16:
		return "(" + e + " & 0x7c00u) == 0x7c00u"
	case transport.BFloat16:
		return "(" + e + " & 0x7f80u) == 0x7f80u"
	}
	return "(__float_as_uint(" + e + ") & 0x7f800000u) == 0x7f800000u"
}

func reductionKernels() []Kernel {
	var ks []Kernel
	for _, dt := range AllTypes {
		for _, op := range ReduceOps {
			ks = append(ks, Kernel{Name: ReduceName(dt, op),
				Params: []Param{{"dst", ptr(dt)}, {"a", "const " + ptr(dt)}, {"b", "const " + ptr(dt)}, {"n", "long long"}},
				body:   reduceBody(dt, op)})
		}
	}
	for _, dt := range AllTypes {
		var body string
		switch {
		case isHalf(dt):
			body = "x[i] = " + store(dt, load(dt, "x[i]")+" / (float)world") + ";"
		case isFloat(dt):
			body = fmt.Sprintf("x[i] = x[i] / (%s)world;", ctype[dt])
		case uctype[dt] != "":
			// C++ division truncates toward zero, like Go's and NCCL's ncclAvg.
			body = fmt.Sprintf("x[i] = (%s)((long long)x[i] / world);", ctype[dt])
		default:
			body = fmt.Sprintf("x[i] = (%s)((unsigned long long)x[i] / (unsigned long long)world);", ctype[dt])
		}
		ks = append(ks, Kernel{Name: AvgName(dt), Params: []Param{{"x", ptr(dt)}, {"n", "long long"}, {"world", "long long"}}, body: body})
	}
	return ks
}

// reduceBody is dst[i] = a[i] op b[i]: halves in float with one rounding (as
// algos/reduce), signed integers wrapping through their unsigned type, and float
// min/max with Go's rules (NaN wins, -0 < +0) so results match the host kernels.
func reduceBody(dt transport.DType, op transport.Op) string {
	t := ctype[dt]
	if isHalf(dt) {
		return fmt.Sprintf("float x = %s, y = %s;\n\tdst[i] = %s;", load(dt, "a[i]"), load(dt, "b[i]"), store(dt, floatOp(op, "x", "y", "float")))
	}
	if isFloat(dt) {
		return fmt.Sprintf("%s x = a[i], y = b[i];\n\tdst[i] = %s;", t, floatOp(op, "x", "y", t))
	}
	switch op {
	case transport.Sum, transport.Prod:
		sym := "+"
		if op == transport.Prod {
			sym = "*"
		}
		if u := uctype[dt]; u != "" {
			return fmt.Sprintf("dst[i] = (%s)(%s)((%s)a[i] %s (%s)b[i]);", t, u, u, sym, u)
		}
		return fmt.Sprintf("dst[i] = (%s)(a[i] %s b[i]);", t, sym)
	case transport.Max:
		return "dst[i] = a[i] > b[i] ? a[i] : b[i];"
	}
	return "dst[i] = a[i] < b[i] ? a[i] : b[i];"
}

func floatOp(op transport.Op, x, y, t string) string {
	switch op {
	case transport.Sum:
		return x + " + " + y
	case transport.Prod:
		return x + " * " + y
	case transport.Max:
		return fmt.Sprintf("goccl_max_%s(%s, %s)", fname(t), x, y)
	}
	return fmt.Sprintf("goccl_min_%s(%s, %s)", fname(t), x, y)
}

func fname(t string) string {
	if t == "double" {
		return "f64"
	}
	return "f32"
}

// Source is the group's complete CUDA C++ translation unit: a prelude of device
// helpers, then every kernel. The text depends only on the group, so it is the same
// in every process and compiles once per process and architecture (nvrtc's cache).
// Under GOCCL_HOST_SHIM (never defined for NVRTC) each kernel also gets a host
// launcher, so tests can run the very same source on the CPU.
func Source(g Group) string {
	var b strings.Builder
	b.WriteString("// goccl device kernels, group " + g.String() + ": generated by nccl/kernels; do not edit.\n")
	b.WriteString(prelude)
	ks := Kernels(g)
	for _, k := range ks {
		b.WriteString("\n")
		writeKernel(&b, k)
	}
	b.WriteString("\n#ifdef GOCCL_HOST_SHIM\n")
	for _, k := range ks {
		writeHostLauncher(&b, k)
	}
	b.WriteString("#endif\n")
	return b.String()
}

func signature(k Kernel) string {
	ps := make([]string, len(k.Params))
	for i, p := range k.Params {
		ps[i] = p.Type + " " + p.Name
	}
	return strings.Join(ps, ", ")
}

func writeKernel(b *strings.Builder, k Kernel) {
	fmt.Fprintf(b, "extern \"C\" __global__ void %s(%s) {\n", k.Name, signature(k))
	if k.raw {
		b.WriteString("\t" + k.body + "\n}\n")
		return
	}
	b.WriteString("\tGOCCL_LOOP(i, n) {\n\t" + strings.ReplaceAll("\t"+k.body, "\n\t", "\n\t\t") + "\n\t}\n}\n")
}

// writeHostLauncher emits NAME__host, which runs the grid one thread at a time, and
// NAME__nargs, so a host emulation of cuLaunchKernel can copy the argument slots.
func writeHostLauncher(b *strings.Builder, k Kernel) {
	args := make([]string, len(k.Params))
	for i, p := range k.Params {
		args[i] = fmt.Sprintf("*(%s*)p[%d]", p.Type, i)
	}
	fmt.Fprintf(b, "extern \"C\" const int %s__nargs = %d;\n", k.Name, len(k.Params))
	fmt.Fprintf(b, "extern \"C\" void %s__host(void** p, goccl_dim3 g, goccl_dim3 blk) {\n", k.Name)
	fmt.Fprintf(b, "\tGOCCL_HOST_GRID(g, blk) %s(%s);\n}\n", k.Name, strings.Join(args, ", "))
}

// prelude holds the device helpers. The 16-bit conversions are bit-exact copies of
// algos/reduce's (round to nearest even; NaN stays NaN), written on raw bit patterns.
const prelude = `
#define GOCCL_LOOP(i, n) for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

__device__ __forceinline__ float goccl_bf16_to_f32(unsigned short h) { return __uint_as_float(((unsigned int)h) << 16); }

__device__ __forceinline__ unsigned short goccl_f32_to_bf16(float f) {
	unsigned int b = __float_as_uint(f);
	if ((b & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((b >> 16) | 0x40u);
	b += 0x7fffu + ((b >> 16) & 1u);
	return (unsigned short)(b >> 16);
}

__device__ __forceinline__ float goccl_f16_to_f32(unsigned short h) {
	unsigned int sign = ((unsigned int)h & 0x8000u) << 16;
	unsigned int e = ((unsigned int)h >> 10) & 0x1fu, m = (unsigned int)h & 0x3ffu;
	if (e == 0x1fu) return __uint_as_float(sign | 0x7f800000u | (m << 13));
	if (e == 0u) {
		float f = (float)m * (1.0f / 16777216.0f); // subnormal: m x 2^-24, exact
		return sign ? -f : f;
	}
	return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}

__device__ __forceinline__ unsigned short goccl_f32_to_f16(float f) {
	unsigned int bits = __float_as_uint(f);
	unsigned short sign = (unsigned short)((bits >> 16) & 0x8000u);
	int exp = (int)((bits >> 23) & 0xffu);
	unsigned int mant = bits & 0x7fffffu;
	if (exp == 0xff) return mant ? (unsigned short)(sign | 0x7c00u | 0x200u | (mant >> 13)) : (unsigned short)(sign | 0x7c00u);
	int e = exp - 127 + 15;
	if (e >= 0x1f) return (unsigned short)(sign | 0x7c00u);
	if (e <= 0) {
		if (e < -10) return sign;
		unsigned int m = mant | 0x800000u;
		unsigned int shift = (unsigned int)(14 - e);
		unsigned int h = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
		if (rem > half || (rem == half && (h & 1u))) h++;
		return (unsigned short)(sign | h);
	}
	unsigned int h = ((unsigned int)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
	return (unsigned short)(sign | h);
}

// Go's min and max for floats: a NaN operand wins, and -0 orders below +0.
__device__ __forceinline__ float goccl_max_f32(float x, float y) {
	if (x != x) return x;
	if (y != y) return y;
	if (x == y) return (__float_as_uint(x) & 0x80000000u) ? y : x;
	return x > y ? x : y;
}
__device__ __forceinline__ float goccl_min_f32(float x, float y) {
	if (x != x) return x;
	if (y != y) return y;
	if (x == y) return (__float_as_uint(x) & 0x80000000u) ? x : y;
	return x < y ? x : y;
}
__device__ __forceinline__ double goccl_max_f64(double x, double y) {
	if (x != x) return x;
	if (y != y) return y;
	if (x == y) return (__double_as_longlong(x) < 0) ? y : x;
	return x > y ? x : y;
}
__device__ __forceinline__ double goccl_min_f64(double x, double y) {
	if (x != x) return x;
	if (y != y) return y;
	if (x == y) return (__double_as_longlong(x) < 0) ? x : y;
	return x < y ? x : y;
}
`
