// Package wasmgen writes synthetic wasm modules for tests and measurements
// of what compiling an untrusted module costs: many tiny functions, one
// huge function, deep nesting, many locals. The modules are valid and
// export what the ABI requires (memory, abi_version, filter), so they reach
// the compiler through the same path as a policy.
package wasmgen

import "encoding/binary"

// Shape describes a synthetic module.
type Shape struct {
	// Functions is the number of extra functions besides abi_version and filter.
	Functions int
	// BodyOps is the number of (i32.const 0; drop) pairs in each extra function.
	BodyOps int
	// Nesting wraps each extra function's body in that many blocks.
	Nesting int
	// Locals declares that many i64 locals in each extra function.
	Locals int
	// BrTable adds to each extra function a br_table with that many
	// labels (all to the function's outermost block).
	BrTable int
	// Globals declares that many immutable i32 globals.
	Globals int
	// FatLoop, when set, makes filter loop forever calling a function of
	// FatLoop increments of a mutable global (4 instructions each, no loop
	// of its own): long straight-line code run over and over. Functions,
	// BodyOps and Globals are ignored.
	FatLoop int
}

// Module returns the wasm bytes of a module of shape s.
func Module(s Shape) []byte {
	if s.FatLoop > 0 {
		return fatLoop(s.FatLoop)
	}
	var out []byte
	out = append(out, 0, 'a', 's', 'm', 1, 0, 0, 0)
	// Types: 0 () -> i32, 1 (i64) -> (), 2 () -> ().
	out = section(out, 1, vec(3, func(b []byte) []byte {
		b = append(b, 0x60, 0, 1, 0x7f)
		b = append(b, 0x60, 1, 0x7e, 0)
		return append(b, 0x60, 0, 0)
	}))
	// Functions: abi_version, filter, then the extra ones.
	out = section(out, 3, vec(2+s.Functions, func(b []byte) []byte {
		b = append(b, 0, 1)
		for i := 0; i < s.Functions; i++ {
			b = append(b, 2)
		}
		return b
	}))
	out = section(out, 5, []byte{1, 0, 1}) // one memory, min 1 page
	if s.Globals > 0 {
		out = section(out, 6, vec(s.Globals, func(b []byte) []byte {
			for i := 0; i < s.Globals; i++ {
				b = append(b, 0x7f, 0, 0x41, 0, 0x0b) // i32 const: i32.const 0
			}
			return b
		}))
	}
	out = exports(out)
	body := extraBody(s)
	out = section(out, 10, vec(2+s.Functions, func(b []byte) []byte {
		b = fn(b, []byte{0, 0x41, 1, 0x0b}) // abi_version: i32.const 1
		b = fn(b, []byte{0, 0x0b})          // filter: nothing
		for i := 0; i < s.Functions; i++ {
			b = append(b, body...)
		}
		return b
	}))
	return out
}

// extraBody is one extra function's size-prefixed body.
func extraBody(s Shape) []byte {
	var code []byte
	if s.Locals > 0 {
		code = append(code, 1)
		code = binary.AppendUvarint(code, uint64(s.Locals))
		code = append(code, 0x7e)
	} else {
		code = append(code, 0)
	}
	for i := 0; i < s.Nesting; i++ {
		code = append(code, 0x02, 0x40) // block (empty type)
	}
	for i := 0; i < s.BodyOps; i++ {
		code = append(code, 0x41, 0, 0x1a) // i32.const 0; drop
	}
	if s.BrTable > 0 {
		code = append(code, 0x02, 0x40, 0x41, 0, 0x0e) // block; i32.const 0; br_table
		code = binary.AppendUvarint(code, uint64(s.BrTable-1))
		for i := 0; i < s.BrTable; i++ {
			code = append(code, 0) // to the block
		}
		code = append(code, 0x0b)
	}
	for i := 0; i < s.Nesting; i++ {
		code = append(code, 0x0b)
	}
	code = append(code, 0x0b)
	return fn(nil, code)
}

func fn(b, code []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(code)))
	return append(b, code...)
}

func name(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func vec(n int, items func([]byte) []byte) []byte {
	return items(binary.AppendUvarint(nil, uint64(n)))
}

func section(out []byte, id byte, content []byte) []byte {
	out = append(out, id)
	out = binary.AppendUvarint(out, uint64(len(content)))
	return append(out, content...)
}

// fatLoop is Module for Shape.FatLoop.
func fatLoop(n int) []byte {
	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	out = section(out, 1, vec(3, func(b []byte) []byte {
		b = append(b, 0x60, 0, 1, 0x7f)
		b = append(b, 0x60, 1, 0x7e, 0)
		return append(b, 0x60, 0, 0)
	}))
	out = section(out, 3, vec(3, func(b []byte) []byte { return append(b, 0, 1, 2) }))
	out = section(out, 5, []byte{1, 0, 1})
	out = section(out, 6, vec(1, func(b []byte) []byte { return append(b, 0x7f, 1, 0x41, 0, 0x0b) })) // mut i32 = 0
	out = exports(out)
	body := []byte{0}
	for i := 0; i < n; i++ {
		body = append(body, 0x23, 0, 0x41, 1, 0x6a, 0x24, 0) // global.get 0; i32.const 1; i32.add; global.set 0
	}
	body = append(body, 0x0b)
	out = section(out, 10, vec(3, func(b []byte) []byte {
		b = fn(b, []byte{0, 0x41, 1, 0x0b})                            // abi_version: i32.const 1
		b = fn(b, []byte{0, 0x03, 0x40, 0x10, 2, 0x0c, 0, 0x0b, 0x0b}) // filter: loop (call 2; br 0) end
		return fn(b, body)
	}))
	return out
}

// exports is the export section every module here has: memory 0,
// abi_version (function 0) and filter (function 1).
func exports(out []byte) []byte {
	return section(out, 7, vec(3, func(b []byte) []byte {
		b = name(b, "memory")
		b = append(b, 2, 0)
		b = name(b, "abi_version")
		b = append(b, 0, 0)
		b = name(b, "filter")
		return append(b, 0, 1)
	}))
}

// Recursion describes a module whose filter recurses: function 2, $down
// (n i32) -> i64, calls itself with n-1 until n is 0 (Depth 0: without
// end) and adds its locals to what the call returned, so they are all
// kept across the call.
type Recursion struct {
	// Depth is how deep filter's call goes; 0 recurses until something
	// stops it.
	Depth uint32
	// Locals is how many i64 locals $down declares and Blocks in how many
	// conditional blocks it sets every one of them: each such block gives
	// the compiler a new value of every local to keep, which is how a
	// small function makes a large frame.
	Locals, Blocks int
	// Indirect makes the recursive call a call_indirect through a table.
	Indirect bool
	// Repeat makes filter loop forever, recursing Depth deep each time.
	Repeat bool
}

// RecursionModule returns the wasm bytes of a module of shape r.
func RecursionModule(r Recursion) []byte {
	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	// Types: 0 () -> i32, 1 (i64) -> (), 2 (i32) -> i64.
	out = section(out, 1, vec(3, func(b []byte) []byte {
		b = append(b, 0x60, 0, 1, 0x7f)
		b = append(b, 0x60, 1, 0x7e, 0)
		return append(b, 0x60, 1, 0x7f, 1, 0x7e)
	}))
	out = section(out, 3, vec(3, func(b []byte) []byte { return append(b, 0, 1, 2) }))
	if r.Indirect {
		out = section(out, 4, vec(1, func(b []byte) []byte { return append(b, 0x70, 0, 1) })) // funcref, min 1
	}
	out = section(out, 5, []byte{1, 0, 1})
	out = exports(out)
	if r.Indirect {
		// Element 0 of table 0 is $down.
		out = section(out, 9, vec(1, func(b []byte) []byte { return append(b, 0, 0x41, 0, 0x0b, 1, 2) }))
	}
	depth := int64(r.Depth)
	if depth == 0 {
		depth = -1 // counts down through 2^32 calls: without end here
	}
	filter := []byte{0}
	if r.Repeat {
		filter = append(filter, 0x03, 0x40) // loop
	}
	filter = append(appendSLEB(append(filter, 0x41), depth), 0x10, 2, 0x1a) // i32.const depth; call $down; drop
	if r.Repeat {
		filter = append(filter, 0x0c, 0, 0x0b) // br 0; end
	}
	filter = append(filter, 0x0b)
	down := []byte{}
	if r.Locals > 0 {
		down = append(down, 1)
		down = binary.AppendUvarint(down, uint64(r.Locals))
		down = append(down, 0x7e)
	} else {
		down = append(down, 0)
	}
	local := func(b []byte, op byte, i int) []byte { return binary.AppendUvarint(append(b, op), uint64(1+i)) }
	for blk := 0; blk < r.Blocks && r.Locals > 0; blk++ {
		// if (n & (blk+1)) { x_i = x_{i+1} + blk for every i }
		down = append(appendSLEB(append(down, 0x20, 0, 0x41), int64(blk+1)), 0x71, 0x04, 0x40)
		for i := 0; i < r.Locals; i++ {
			down = local(down, 0x20, (i+1)%r.Locals)
			down = append(appendSLEB(append(down, 0x42), int64(blk)), 0x7c)
			down = local(down, 0x21, i)
		}
		down = append(down, 0x0b)
	}
	// if (result i64) n == 0 then 0 else down(n-1) + sum of locals
	down = append(down, 0x20, 0, 0x45, 0x04, 0x7e, 0x42, 0, 0x05)
	down = append(down, 0x20, 0, 0x41, 1, 0x6b) // n - 1
	if r.Indirect {
		down = append(down, 0x41, 0, 0x11, 2, 0) // i32.const 0; call_indirect (type 2) table 0
	} else {
		down = append(down, 0x10, 2)
	}
	for i := 0; i < r.Locals; i++ {
		down = append(local(down, 0x20, i), 0x7c)
	}
	down = append(down, 0x0b, 0x0b)
	out = section(out, 10, vec(3, func(b []byte) []byte {
		b = fn(b, []byte{0, 0x41, 1, 0x0b}) // abi_version: i32.const 1
		b = fn(b, filter)
		return fn(b, down)
	}))
	return out
}

func appendSLEB(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// StackHoard returns a module whose filter first recurses depth deep
// through $big, a function of bigLocals locals that keeps none of them
// across its call (a small frame of large weight), and then, from a
// fresh $big, smallDepth deep through $small, a function of small weight
// and frame: the shape that would hand the weight the first recursion
// gave back, once it returned, to the second.
func StackHoard(bigLocals int, depth, smallDepth uint32) []byte {
	out := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	// Types: 0 () -> i32, 1 (i64) -> (), 2 (i32 i32) -> (), 3 (i32) -> ().
	out = section(out, 1, vec(4, func(b []byte) []byte {
		b = append(b, 0x60, 0, 1, 0x7f)
		b = append(b, 0x60, 1, 0x7e, 0)
		b = append(b, 0x60, 2, 0x7f, 0x7f, 0)
		return append(b, 0x60, 1, 0x7f, 0)
	}))
	out = section(out, 3, vec(4, func(b []byte) []byte { return append(b, 0, 1, 2, 3) }))
	out = section(out, 5, []byte{1, 0, 1})
	out = exports(out)
	filter := appendSLEB([]byte{0, 0x41}, int64(depth))
	filter = append(filter, 0x41, 0, 0x10, 2) // call $big(depth, 0)
	filter = append(filter, 0x41, 0, 0x41)
	filter = append(appendSLEB(filter, int64(smallDepth)), 0x10, 2, 0x0b) // call $big(0, smallDepth)
	big := binary.AppendUvarint([]byte{1}, uint64(bigLocals))
	big = append(big, 0x7f)
	// if n { big(n-1, s); return }
	big = append(big, 0x20, 0, 0x04, 0x40, 0x20, 0, 0x41, 1, 0x6b, 0x20, 1, 0x10, 2, 0x0f, 0x0b)
	// if s { small(s) }
	big = append(big, 0x20, 1, 0x04, 0x40, 0x20, 1, 0x10, 3, 0x0b, 0x0b)
	// small: if n { small(n-1) }
	small := []byte{0, 0x20, 0, 0x04, 0x40, 0x20, 0, 0x41, 1, 0x6b, 0x10, 3, 0x0b, 0x0b}
	out = section(out, 10, vec(4, func(b []byte) []byte {
		b = fn(b, []byte{0, 0x41, 1, 0x0b})
		b = fn(b, filter)
		b = fn(b, big)
		return fn(b, small)
	}))
	return out
}
