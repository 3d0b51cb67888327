// dependent_false<T>: false, but only once T is known, so a primary template that must never be
// instantiated can say so in a static_assert that fires only when it is (CUTLASS's idiom).
#pragma once

namespace oar {

template <class...>
inline constexpr bool dependent_false = false;

}  // namespace oar
