// The state of every macro name that <remat/milp/lpsolve.hpp> saves and restores (the list in
// <remat/milp/detail/lpsolve_macro_names.hpp>), as an array of {name, state}: the state is the
// name's expansion where it is an object-like macro, the name itself where it is no macro (or a
// function-like one, which is not expanded without arguments; the tests check a few of those by
// name). Included once before lpsolve.hpp and once after it, the two arrays must be equal.
// No include guard: the includer names the array in REMAT_TEST_MACRO_STATE. A test includes
// <climits> and <cstddef> before the first one, as lpsolve.hpp does before its save: CHAR_BIT
// and NULL are in the list, and a standard header that defines them is no leak.
#include <string_view>
#include <utility>

// Variadic: an expansion may hold commas.
#define REMAT_TEST_STR(...) #__VA_ARGS__
#define REMAT_TEST_EXPANSION(...) REMAT_TEST_STR(__VA_ARGS__)
#define REMAT_LPSOLVE_MACRO(name) {#name, REMAT_TEST_EXPANSION(name)},
inline constexpr std::pair<std::string_view, std::string_view> REMAT_TEST_MACRO_STATE[] = {
#include <remat/milp/detail/lpsolve_macro_names.hpp>
};
#undef REMAT_LPSOLVE_MACRO
#undef REMAT_TEST_EXPANSION
#undef REMAT_TEST_STR
