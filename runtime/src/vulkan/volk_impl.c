// volk's implementation, compiled once as C (volk.c comes with Debian's libvulkan-volk-dev).
#include "volk.c"
