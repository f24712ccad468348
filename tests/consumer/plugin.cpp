// A shared library that embeds libferry.a (it must be position-independent to link).
#include "ferry/ferry.hpp"

extern "C" int consumer_plugin_backend_count() {
  return static_cast<int>(ferry::list_backends().size());
}
