/* Preloaded (LD_PRELOAD) into every test of the `asan` preset; not part of ferry.
 *
 * The Vulkan loader dlclose()s the driver (lavapipe) and the validation layer in
 * vkDestroyInstance, and ferry creates and destroys instances while probing backends. At exit,
 * LeakSanitizer then meets stack frames in unmapped libraries: it cannot name them
 * ("<unknown module>", or a wrong module), so no suppression can match them, and memory that
 * lavapipe still pointed to from its global data when it was unloaded is reported as leaked.
 *
 * Opening these libraries once more with RTLD_NODELETE keeps them mapped until exit (the
 * loader's own dlopen finds the same object; its dlclose no longer unmaps it). RTLD_LOCAL: none
 * of their symbols enter the global scope. A library that is not installed is skipped. Nothing
 * else changes: the loader still loads, initializes and tears down its drivers and layers.
 */
#include <dlfcn.h>
#include <stddef.h>

__attribute__((constructor)) static void ferry_keep_vulkan_libraries_loaded(void) {
  static const char* const libraries[] = {
      "libvulkan_lvp.so",                 /* Mesa lavapipe, the CPU Vulkan driver used in CI */
      "libVkLayer_khronos_validation.so", /* Khronos validation layer (FERRY_VALIDATION=1) */
  };
  for (size_t i = 0; i < sizeof libraries / sizeof libraries[0]; ++i) {
    (void)dlopen(libraries[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  }
}
