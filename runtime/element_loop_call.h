// element_loop_call.h — what a compiled element loop (jit::ElementLoop, Note [Element loops] in
// frontend/trace/element_loops.cpp) receives when it runs, and the errors it can stop with.
#pragma once

#include <cstdint>

namespace framejit::rt {

/// Why an element loop stopped early, as the exception CPython would have raised at that point.
/// A loop returns one of these; None means it ran to its end.
enum class LoopError : int32_t {
  None = 0,
  IndexOutOfBounds,  // IndexError: detail = {index, axis, size}
  ZeroDivision,      // ZeroDivisionError: a Python int or float divided by zero; detail[0] says
                     //   which message CPython gives (ZeroDivisionMessage)
  IntOverflow,       // a Python int left the 64 bits compiled loops hold them in
  MathDomain,        // ValueError: math domain error (math.sqrt(-1), math.log(0))
  MathRange,         // OverflowError: math range error (math.exp(1000))
  FloatToInt,        // int(x) of a NaN (ValueError) or an infinity (OverflowError): detail[0] = 1 for NaN
  ShapeMismatch,     // ValueError: 1-d operands of lengths detail[0] and detail[1] that do not fit together,
                     // in the words of ShapeUse detail[2]
};

/// CPython's ZeroDivisionError message for what divided by zero (LoopError::ZeroDivision's detail[0]).
enum class ZeroDivisionMessage : int64_t {
  IntTrueDivide = 0,  // "division by zero": int / int
  TrueDivide,         // "float division by zero"
  IntFloorDivide,     // "integer division or modulo by zero"
  IntModulo,          // "integer modulo by zero"
  FloorDivide,        // "float floor division by zero"
  Modulo,             // "float modulo" ("float modulo by zero" from 3.13)
};

/// Where a ShapeMismatch happened (NumPy words each differently).
enum class ShapeUse : int64_t {
  Broadcast = 0,  // an elementwise operation: operands could not be broadcast together
  Dot = 1,        // a dot product of two 1-d operands: shapes not aligned
  Matmul = 2,     // @: a mismatch in its core dimension
  Assign = 3,     // a slice assignment: could not broadcast input array into the slice
};

/// The one argument of a compiled element loop: `int32_t f(ElementLoopCall*)` returns a LoopError.
/// Arrays are given by their element (0, ..., 0), sizes and byte strides; numbers travel in
/// `scalars` as int64 or the bits of a double, the loop's parameters first (read at entry), then
/// its results (written at its end, and only then).
struct ElementLoopCall {
  char* const* data;
  const int64_t* const* dims;
  const int64_t* const* strides;
  int64_t* scalars;
  int64_t detail[3];  // set with the error that needs it
};
using ElementLoopFn = int32_t (*)(ElementLoopCall*);

}  // namespace framejit::rt
