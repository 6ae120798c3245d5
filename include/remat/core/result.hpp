#pragma once
// result<T>: a value or an error with a status and a message a user can act on. Expected
// failures (budget too small, infeasible, time limit, malformed input) come back this way and
// never throw; programming errors do throw (bad_result_access when reading a missing value).

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include <remat/core/units.hpp>

namespace remat {

enum class status {
  ok,
  infeasible,
  budget_too_small,
  time_limit,
  invalid_problem,
  solver_error,
  execution_error,  ///< running a schedule failed: a layer threw, outgrew its profile, or the
                    ///< budget ran out
};

inline constexpr std::string_view to_string(status s) {
  switch (s) {
    case status::ok:
      return "ok";
    case status::infeasible:
      return "infeasible";
    case status::budget_too_small:
      return "budget_too_small";
    case status::time_limit:
      return "time_limit";
    case status::invalid_problem:
      return "invalid_problem";
    case status::solver_error:
      return "solver_error";
    case status::execution_error:
      return "execution_error";
  }
  return "unknown";
}

/// Why a computation did not produce a value.
struct error {
  status code = status::solver_error;
  std::string message;
  /// For status::budget_too_small: the smallest budget (bytes) with which the request succeeds.
  std::optional<bytes> minimum_budget;
};

class bad_result_access : public std::logic_error {
 public:
  explicit bad_result_access(const error& e)
      : std::logic_error("remat: value() called on a failed result (" +
                         std::string(to_string(e.code)) + "): " + e.message) {}
};

template <class T>
class [[nodiscard]] result {
 public:
  using value_type = T;
  result(T value) : data_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit
  result(error e) : data_(std::in_place_index<1>, std::move(e)) {       // NOLINT: implicit
    if (std::get<1>(data_).code == status::ok)
      throw std::logic_error("remat: an error must not carry status::ok");
  }

  [[nodiscard]] bool ok() const noexcept { return data_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  [[nodiscard]] status code() const noexcept { return ok() ? status::ok : err().code; }

  [[nodiscard]] const T& value() const& {
    if (!ok()) throw bad_result_access(err());
    return std::get<0>(data_);
  }
  [[nodiscard]] T& value() & {
    if (!ok()) throw bad_result_access(err());
    return std::get<0>(data_);
  }
  [[nodiscard]] T&& value() && {
    if (!ok()) throw bad_result_access(err());
    return std::get<0>(std::move(data_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  /// On a temporary result, the value moves out (`chain c = *profile_chain(...)`); a reference
  /// kept to it would dangle, and the executor's constructors refuse such temporaries.
  T&& operator*() && { return std::move(*this).value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  /// The error; only valid when !ok().
  [[nodiscard]] const error& err() const {
    if (ok()) throw std::logic_error("remat: err() called on a successful result");
    return std::get<1>(data_);
  }
  [[nodiscard]] std::string message() const { return ok() ? std::string() : err().message; }

 private:
  std::variant<T, error> data_;
};

/// result<void>: success or an error.
template <>
class [[nodiscard]] result<void> {
 public:
  result() = default;
  result(error e) : err_(std::move(e)) {  // NOLINT: implicit
    if (err_->code == status::ok)
      throw std::logic_error("remat: an error must not carry status::ok");
  }
  [[nodiscard]] bool ok() const noexcept { return !err_.has_value(); }
  explicit operator bool() const noexcept { return ok(); }
  [[nodiscard]] status code() const noexcept { return ok() ? status::ok : err_->code; }
  [[nodiscard]] const error& err() const {
    if (ok()) throw std::logic_error("remat: err() called on a successful result");
    return *err_;
  }
  [[nodiscard]] std::string message() const { return ok() ? std::string() : err_->message; }

 private:
  std::optional<error> err_;
};

}  // namespace remat
