// function_ref.h — a non-owning, non-allocating reference to a callable (what the hot path passes
// where std::function would allocate or copy captures).
#pragma once

#include <type_traits>
#include <utility>

namespace framejit::rt {

template <typename Fn>
class FunctionRef;

/// Refers to a callable that must outlive every call through the reference (a lambda passed down
/// the stack, as parallel_for and the view remaps take them), or to a plain function. Two words;
/// copying it copies no captures.
template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef> &&
                                                    std::is_invocable_r_v<R, F&, Args...>>>
  FunctionRef(F&& f) noexcept {  // NOLINT(google-explicit-constructor): passed like std::function
    using D = std::decay_t<F>;
    if constexpr (std::is_pointer_v<D> && std::is_function_v<std::remove_pointer_t<D>>) {
      fn_ = f;
      call_ = &invoke_function;
    } else {
      obj_ = const_cast<void*>(static_cast<const void*>(&f));
      call_ = &invoke<std::remove_reference_t<F>>;
    }
  }

  R operator()(Args... args) const { return call_(*this, std::forward<Args>(args)...); }

private:
  template <typename F>
  static R invoke(const FunctionRef& self, Args... args) {
    return (*static_cast<F*>(self.obj_))(std::forward<Args>(args)...);
  }
  static R invoke_function(const FunctionRef& self, Args... args) { return self.fn_(std::forward<Args>(args)...); }

  union {
    void* obj_;
    R (*fn_)(Args...);
  };
  R (*call_)(const FunctionRef&, Args...);
};

}  // namespace framejit::rt
