// Test library for C++ names (tests/lua/test_native_names.lua): an
// extern "C" entry for the FFI, a namespaced static member function and a
// function template, whose symbols are mangled (_ZN4game4Phys4stepEmi,
// _Z5twiceImET_S0_i). It allocates with operator new, so that it links
// libstdc++ (which has __cxa_demangle) as a C++ library does.
#include <vector>

#define NOINLINE __attribute__((noinline))

static volatile unsigned long sink;

template <typename T> NOINLINE T twice(T x, int k)
{
  T s = x;
  for (int i = 0; i < k; i++) s += (s >> 3) ^ static_cast<T>(i);
  sink = s;
  return s * 2;
}

namespace game {
struct Phys {
  static unsigned long step(unsigned long n, int k);
};

NOINLINE unsigned long Phys::step(unsigned long n, int k)
{
  std::vector<unsigned long> v(16, n);
  unsigned long s = 0;
  for (unsigned long i = 0; i < n; i++) s += twice<unsigned long>(v[i & 15] + i, k);
  sink = s;
  return s + 1;
}
}  // namespace game

extern "C" double ljpx_run(long n)
{
  return static_cast<double>(game::Phys::step(static_cast<unsigned long>(n), 40));
}
