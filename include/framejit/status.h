// status.h — errors as values on the compile side: Status, Expected<T> and FJ_PROPAGATE.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace framejit {

/// Why a compile-side step failed. `Unsupported` means "a graph break": the code still runs, in
/// CPython; every other code is an internal error.
enum class StatusCode { Ok, Unsupported, InvalidArgument, Internal };

/// The result of a compile-side step that returns nothing. Cheap to pass around when Ok.
class [[nodiscard]] Status {
public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  static Status unsupported(std::string m) { return {StatusCode::Unsupported, std::move(m)}; }
  static Status invalid(std::string m) { return {StatusCode::InvalidArgument, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::Internal, std::move(m)}; }

  bool is_ok() const { return code_ == StatusCode::Ok; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

private:
  StatusCode code_ = StatusCode::Ok;
  std::string message_;
};

/// A value or the Status that explains why there is none (LLVM's Expected, in small).
template <typename T>
class [[nodiscard]] Expected {
public:
  Expected(T value) : v_(std::move(value)) {}
  Expected(Status error) : v_(std::move(error)) {}

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& operator*() { return std::get<0>(v_); }
  const T& operator*() const { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  const Status& error() const { return std::get<1>(v_); }

private:
  std::variant<T, Status> v_;
};

}  // namespace framejit

/// Return early from the enclosing function when `expr` (a Status) is not Ok.
#define FJ_PROPAGATE(expr)                        \
  do {                                            \
    ::framejit::Status fj_status_ = (expr);       \
    if (!fj_status_.is_ok()) return fj_status_;   \
  } while (0)
