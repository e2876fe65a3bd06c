# loom_direct_links(<target> <out-var>): what <target> links directly, its
# own and its interface link libraries, with $<LINK_ONLY:x> (how static
# dependencies are wrapped) unwrapped. The walks below share it.
function(loom_direct_links target out)
  get_target_property(type ${target} TYPE)
  set(deps "")
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(direct ${target} LINK_LIBRARIES)
    if(direct)
      list(APPEND deps ${direct})
    endif()
  endif()
  get_target_property(iface ${target} INTERFACE_LINK_LIBRARIES)
  if(iface)
    list(APPEND deps ${iface})
  endif()
  list(TRANSFORM deps REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1")
  set(${out} ${deps} PARENT_SCOPE)
endfunction()

# loom_check_not_linked(<target> <forbidden>...): fails the configure step
# when <target> links any of <forbidden>, directly or through other targets.
# Keeps the runtime free of the compile side (protobuf, ONNX) as the code
# grows: a stray target_link_libraries is caught at configure time.
function(loom_check_not_linked target)
  set(forbidden ${ARGN})
  set(queue ${target})
  set(seen "")
  while(queue)
    list(POP_FRONT queue current)
    if(current IN_LIST seen OR NOT TARGET ${current})
      continue()
    endif()
    list(APPEND seen ${current})
    loom_direct_links(${current} deps)
    foreach(dep IN LISTS deps)
      if(dep IN_LIST forbidden)
        message(FATAL_ERROR "${target} must not link ${dep} (reached through ${current}); "
                            "the runtime never links the compile side")
      endif()
      list(APPEND queue ${dep})
    endforeach()
  endwhile()
endfunction()

# loom_check_plugin_links(<target>...): fails the configure step when a
# plugin links anything of the host side: a target defined under core/,
# conformance/ or tools/ (the runtime, the compiler, the conformance suite,
# their internals), directly or through other targets. A plugin speaks to
# Loom through plugin.h only, so what it may link of Loom is the SDK
# (Loom::sdk) and the graph schema (Loom::graph_schema), both under sdk/
# and schemas/; third-party libraries (oneDNN, OpenMP, Threads) are its own
# business.
function(loom_check_plugin_links)
  foreach(target IN LISTS ARGN)
    if(NOT TARGET ${target})
      continue()
    endif()
    set(queue ${target})
    set(seen "")
    while(queue)
      list(POP_FRONT queue current)
      if(current IN_LIST seen OR NOT TARGET ${current})
        continue()
      endif()
      list(APPEND seen ${current})
      get_target_property(aliased ${current} ALIASED_TARGET)
      if(aliased)
        list(APPEND queue ${aliased})
        continue()
      endif()
      get_target_property(imported ${current} IMPORTED)
      if(NOT current STREQUAL target AND NOT imported)
        get_target_property(dir ${current} SOURCE_DIR)
        foreach(host_side core conformance tools)
          string(FIND "${dir}/" "${CMAKE_SOURCE_DIR}/${host_side}/" at)
          if(at EQUAL 0)
            message(FATAL_ERROR "plugin target ${target} links ${current} (${dir}), which is host "
                                "side: a plugin links only the SDK and the graph schema")
          endif()
        endforeach()
      endif()
      loom_direct_links(${current} deps)
      list(APPEND queue ${deps})
    endwhile()
  endforeach()
endfunction()
