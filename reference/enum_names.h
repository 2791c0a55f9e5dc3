/// Internal: one table of {enumerator, name} per enum drives parsing, printing and listing it, so the three cannot
/// disagree (not part of the public API).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "reference/types.h"

namespace statecut::ref::detail {

template <class E>
struct Named {
  E value;
  const char* name;
};

/// The table's name of `value`, "?" for a value the table lacks.
template <class E, std::size_t N>
const char* name_of(const Named<E> (&table)[N], E value) {
  for (const Named<E>& e : table)
    if (e.value == value) return e.name;
  return "?";
}

/// The enumerator named `name`; otherwise ShapeError "unknown <what> '<name>' (expected a, b or c)".
template <class E, std::size_t N>
E from_name(const Named<E> (&table)[N], const std::string& name, const char* what) {
  for (const Named<E>& e : table)
    if (name == e.name) return e.value;
  std::string list;
  for (std::size_t i = 0; i < N; ++i) list += std::string(i == 0 ? "" : i + 1 == N ? " or " : ", ") + table[i].name;
  throw ShapeError("unknown " + std::string(what) + " '" + name + "' (expected " + list + ")");
}

/// Every enumerator of the table, in table order.
template <class E, std::size_t N>
std::vector<E> values_of(const Named<E> (&table)[N]) {
  std::vector<E> v;
  for (const Named<E>& e : table) v.push_back(e.value);
  return v;
}

}  // namespace statecut::ref::detail
