// checkpoint/pickle.hpp — a restricted pickle machine: builds a value graph, never executes anything.
//
// Python's pickle format is a small stack machine whose GLOBAL + REDUCE opcodes call arbitrary Python
// callables. This machine understands the data opcodes of protocols 0-5 that torch.save emits (and the
// binary ones of later protocols), and turns every GLOBAL into an inert Global value: what a REDUCE or
// NEWOBJ of it means is decided by the caller's Hooks (which may refuse the file), never by running code.
//
//   pickle::Graph g;
//   MyHooks hooks;                                              // check_global / call / persistent_load
//   pickle::ValueId root = pickle::unpickle(bytes, n, g, hooks, path, "archive/data.pkl");
//   const pickle::Value& v = g[root];
//
// Resource bounds (objects, stack depth, memo size, container items) are checked while running, so a
// hostile pickle costs at most a few hundred MB however it is built. The graph may contain cycles and
// shared sub-objects (the memo allows both): consumers must bound their walks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

namespace vocablens::pickle {

using ValueId = uint32_t;

enum class Kind : uint8_t {
  None,
  Bool,     ///< i = 0 or 1
  Int,      ///< i
  BigInt,   ///< an integer that does not fit in int64 (value not kept)
  Float,    ///< f
  String,   ///< s, valid UTF-8
  Bytes,    ///< s, raw bytes (BINBYTES, BYTEARRAY8, and Python 2 BINSTRING)
  Tuple,    ///< items
  List,     ///< items (sets and frozensets are lists too: order as pickled)
  Dict,     ///< items = key0, value0, key1, value1, ... in insertion order (dict and OrderedDict)
  Global,   ///< s = "module.name": a reference to a Python object, inert
  Storage,  ///< made by Hooks::persistent_load; i indexes the hooks' own table
  Tensor,   ///< made by Hooks::call; i indexes the hooks' own table
  Opaque,   ///< something we do not model (an instance of an unknown class ...); s says what
};

/// Human-readable kind name for error messages ("dict", "tuple", ...).
const char* kind_name(Kind k);

struct Value {
  Kind kind = Kind::None;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<ValueId> items;
};

/// Owns every value of one unpickling; ids index it. A deque keeps references stable while it grows.
/// Values refer to each other by id, so destruction is flat (no recursion, cycles are harmless).
class Graph {
 public:
  ValueId add(Value v) {
    values_.push_back(std::move(v));
    return static_cast<ValueId>(values_.size() - 1);
  }
  Value& operator[](ValueId id) { return values_[id]; }
  const Value& operator[](ValueId id) const { return values_[id]; }
  size_t size() const { return values_.size(); }

 private:
  std::deque<Value> values_;
};

/// What the file's globals and persistent ids mean. Implementations throw FormatError to refuse.
class Hooks {
 public:
  virtual ~Hooks() = default;
  /// GLOBAL / STACK_GLOBAL: throw to refuse the reference; otherwise an inert Global is pushed.
  virtual void check_global(const std::string& module, const std::string& name) = 0;
  /// REDUCE (callable(*args)) or NEWOBJ (cls.__new__(cls, *args)) where `callable` is a Global and
  /// `args` a Tuple: returns the id of the result (usually freshly added to g).
  virtual ValueId call(Graph& g, ValueId callable, ValueId args) = 0;
  /// BINPERSID: the object the persistent id `pid` stands for.
  virtual ValueId persistent_load(Graph& g, ValueId pid) = 0;
};

struct Limits {
  size_t max_values = size_t{1} << 22;  ///< objects in the graph
  size_t max_stack = size_t{1} << 22;   ///< stack entries + marks
  size_t max_memo = size_t{1} << 22;    ///< distinct memo slots
  size_t max_items = size_t{1} << 24;   ///< container items in total
  size_t max_global_len = 256;          ///< bytes in a GLOBAL module or name line
};

/// Runs the pickle in [data, data + size) and returns the id of the object STOP returns.
/// Errors (truncation, unknown opcodes, stack/memo misuse, invalid UTF-8, exceeded limits, hook refusals)
/// throw FormatError(path, "<what>: <problem> (opcode at byte N)"), one line.
ValueId unpickle(const uint8_t* data, size_t size, Graph& g, Hooks& hooks, const std::string& path, const std::string& what,
                 const Limits& limits = Limits());

}  // namespace vocablens::pickle
