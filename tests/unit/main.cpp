// doctest's main for this executable (one per executable, in its own file).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
