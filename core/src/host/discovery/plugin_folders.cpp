// The plugin search folders (plugin_folders.hpp).
#include "host/discovery/plugin_folders.hpp"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <set>
#include <string_view>
#include <utility>

#include "host/plugin_host.hpp"

namespace loom::host {
namespace {

std::vector<std::filesystem::path> split_path_list(std::string_view list) {
  std::vector<std::filesystem::path> out;
  while (!list.empty()) {
    size_t colon = list.find(':');
    std::string_view item = list.substr(0, colon);
    if (!item.empty()) out.emplace_back(item);
    if (colon == std::string_view::npos) break;
    list.remove_prefix(colon + 1);
  }
  return out;
}

std::filesystem::path plugins_under(const std::filesystem::path& dir) {
  return (dir / "loom" / "plugins").lexically_normal();
}

}  // namespace

std::optional<std::filesystem::path> loom_library_file() {
  Dl_info info{};
  struct link_map* map = nullptr;
  // The link map tells a shared object from the program: the program's
  // entry has an empty name.
  if (dladdr1(reinterpret_cast<void*>(&loom_library_file), &info,
              reinterpret_cast<void**>(&map), RTLD_DL_LINKMAP) == 0 ||
      map == nullptr || map->l_name == nullptr || map->l_name[0] == '\0') {
    return std::nullopt;
  }
  std::error_code ec;
  std::filesystem::path file = std::filesystem::weakly_canonical(map->l_name, ec);
  if (ec) return std::nullopt;
  return file;
}

std::optional<std::filesystem::path> user_plugin_folder() {
  // The XDG base directory rule: a relative $XDG_DATA_HOME is ignored.
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && xdg[0] == '/') {
    return plugins_under(xdg);
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/') {
    return plugins_under(std::filesystem::path(home) / ".local" / "share");
  }
  return std::nullopt;
}

std::vector<PluginFolder> plugin_search_folders(const HostOptions& options) {
  std::vector<PluginFolder> folders;
  std::set<std::filesystem::path> seen;
  auto add = [&](std::filesystem::path path, const char* origin) {
    std::error_code ec;
    std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
    if (ec) canonical = path.lexically_normal();
    // A folder named twice (say, in the options and in the environment) is
    // searched once, so its plugins do not show up as duplicates of themselves.
    if (!seen.insert(canonical).second) return;
    PluginFolder folder;
    folder.exists = std::filesystem::is_directory(path, ec);
    folder.path = std::move(path);
    folder.origin = origin;
    folders.push_back(std::move(folder));
  };

  for (const auto& path : options.search_paths) add(path, "option");
  if (options.use_environment) {
    if (const char* env = std::getenv("LOOM_PLUGIN_PATH"); env != nullptr) {
      for (auto& path : split_path_list(env)) add(std::move(path), "LOOM_PLUGIN_PATH");
    }
  }
  if (options.use_default_folder) {
    // The same place in the build and the install tree.
    std::error_code ec;
    std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec && !exe.empty()) add(plugins_under(exe.parent_path() / ".." / "lib"), "program");
    if (auto library = loom_library_file()) add(plugins_under(library->parent_path()), "library");
  }
  if (options.use_user_folder) {
    if (auto user = user_plugin_folder()) add(std::move(*user), "user");
  }
  return folders;
}

}  // namespace loom::host
