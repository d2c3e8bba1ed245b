// host.h — run Python models from C++: an embedded CPython with framejit installed as its frame
// evaluator, called with framejit::Tensors that view the host's own memory (public C++ API).
//
//   framejit::Host host;
//   host.add_import_path("models");
//   auto x = framejit::Tensor::from_blob(ptr, {8, 16}, framejit::DType::Float32);
//   framejit::Expected<framejit::Tensor> y = host.call("model", "forward", {x, w, b});
//   if (!y) std::cerr << y.error().message();   // a Python exception, with its traceback
//   const float* out = y->data<float>();
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "framejit/api.h"
#include "framejit/status.h"
#include "framejit/tensor.h"

namespace framejit {

struct HostOptions {
  /// PYTHONHOME of the embedded interpreter; empty: the one libpython was built for (the system
  /// python3, whose NumPy the models use).
  std::string python_home;
  /// Folders added to sys.path (as add_import_path does).
  std::vector<std::string> import_paths;
  /// framejit's backend: "jit" (default), "eager", or "none" (plain CPython, framejit not
  /// installed: for comparisons).
  std::string backend = "jit";
  /// Folder holding the `framejit` Python package; empty: FRAMEJIT_PYTHONPATH if set, else the
  /// package installed next to this library (or the build tree it came from).
  std::string framejit_path;
};

/// The embedded interpreter. The first Host of a process starts CPython (or, inside a process that
/// already runs Python, uses that interpreter); the interpreter ends when the last Host is
/// destroyed. CPython and NumPy cannot be started twice in one process, so a Host made after that
/// fails every call with a clear error. Calls may come from any thread: each takes the GIL.
class FRAMEJIT_API Host {
public:
  explicit Host(HostOptions options = {});
  ~Host();
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  /// Ok, or why the interpreter or framejit could not be started (every call then fails with it).
  const Status& status() const;

  /// Appends `path` to sys.path.
  Status add_import_path(const std::string& path);

  /// Calls module.function(*args): each tensor arrives as a NumPy array viewing its memory (no
  /// copy; writes by the model are visible to the host). The result must be one array (or a
  /// number, which becomes a 0-d tensor); use call_all for tuples.
  Expected<Tensor> call(const std::string& module, const std::string& function, const std::vector<Tensor>& args);
  /// As call, for functions returning a tuple or list of arrays (one array gives one tensor).
  Expected<std::vector<Tensor>> call_all(const std::string& module, const std::string& function,
                                         const std::vector<Tensor>& args);

  /// Runs a script as __main__ with sys.argv = {path, args...}, as `python -m framejit` does.
  /// Returns its exit status (0, a SystemExit code, or 1 after printing an exception).
  int run_script(const std::string& path, const std::vector<std::string>& args);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace framejit
