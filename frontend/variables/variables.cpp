// variables.cpp — names of variable kinds for messages.
#include "frontend/variables/variables.h"

namespace framejit::frontend {

const char* var_kind_name(VarKind k) {
  switch (k) {
    case VarKind::Null: return "NULL";
    case VarKind::Const: return "a constant";
    case VarKind::Tensor: return "an array";
    case VarKind::Scalar: return "a number";
    case VarKind::Tuple: return "a tuple";
    case VarKind::List: return "a list";
    case VarKind::Dict: return "a dict";
    case VarKind::Function: return "a function";
    case VarKind::Method: return "a bound method";
    case VarKind::Builtin: return "a builtin";
    case VarKind::AttrMethod: return "a method";
    case VarKind::Module: return "a module";
    case VarKind::Object: return "an object";
    case VarKind::Class: return "a class";
    case VarKind::Cell: return "a cell";
    case VarKind::Iterator: return "an iterator";
    case VarKind::Slice: return "a slice";
    case VarKind::Set: return "a set";
    case VarKind::Super: return "a super() object";
  }
  return "?";
}

}  // namespace framejit::frontend
