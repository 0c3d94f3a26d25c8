// checkpoint/pickle.cpp — the restricted pickle machine (opcode semantics as in CPython's Lib/pickle.py,
// class _Unpickler; opcode table in Lib/pickletools.py).
//
// Python's MARK starts a new stack and hides the old one ("metastack"); here the stack is flat and
// `marks` records where each hidden part ends, so every pop checks it does not reach below the last mark.
#include "checkpoint/pickle.hpp"

#include <cstring>
#include <unordered_map>

#include "vocablens/error.hpp"

namespace vocablens::pickle {

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::BigInt: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::Tuple: return "tuple";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Global: return "global";
    case Kind::Storage: return "storage";
    case Kind::Tensor: return "tensor";
    case Kind::Opaque: return "object";
  }
  return "?";
}

namespace detail {

// Opcodes (pickletools.py names).
enum Op : uint8_t {
  MARK = '(',
  STOP = '.',
  POP = '0',
  POP_MARK = '1',
  DUP = '2',
  BININT = 'J',
  BININT1 = 'K',
  BININT2 = 'M',
  NONE = 'N',
  BINPERSID = 'Q',
  REDUCE = 'R',
  BINSTRING = 'T',
  SHORT_BINSTRING = 'U',
  BINUNICODE = 'X',
  APPEND = 'a',
  BUILD = 'b',
  GLOBAL = 'c',
  DICT = 'd',
  EMPTY_DICT = '}',
  APPENDS = 'e',
  BINGET = 'h',
  LONG_BINGET = 'j',
  LIST = 'l',
  EMPTY_LIST = ']',
  BINPUT = 'q',
  LONG_BINPUT = 'r',
  SETITEM = 's',
  TUPLE = 't',
  EMPTY_TUPLE = ')',
  SETITEMS = 'u',
  BINFLOAT = 'G',
  PROTO = 0x80,
  NEWOBJ = 0x81,
  TUPLE1 = 0x85,
  TUPLE2 = 0x86,
  TUPLE3 = 0x87,
  NEWTRUE = 0x88,
  NEWFALSE = 0x89,
  LONG1 = 0x8a,
  LONG4 = 0x8b,
  BINBYTES = 'B',
  SHORT_BINBYTES = 'C',
  SHORT_BINUNICODE = 0x8c,
  BINUNICODE8 = 0x8d,
  BINBYTES8 = 0x8e,
  EMPTY_SET = 0x8f,
  ADDITEMS = 0x90,
  FROZENSET = 0x91,
  NEWOBJ_EX = 0x92,
  STACK_GLOBAL = 0x93,
  MEMOIZE = 0x94,
  FRAME = 0x95,
  BYTEARRAY8 = 0x96,
};

// Strict UTF-8 (no overlongs, no surrogates, <= U+10FFFF): strings end up in JSON, which must be valid.
bool valid_utf8(const uint8_t* s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07;
    else return false;
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

class Machine {
 public:
  Machine(const uint8_t* data, size_t size, Graph& g, Hooks& hooks, const std::string& path, const std::string& what,
          const Limits& limits)
      : p_(data), n_(size), g_(g), hooks_(hooks), path_(path), what_(what), lim_(limits) {}

  ValueId run() {
    // Shared constants: None/True/False need no object each.
    none_ = make(Value{});
    true_ = make(Value{Kind::Bool, 1, 0, {}, {}});
    false_ = make(Value{Kind::Bool, 0, 0, {}, {}});
    while (true) {
      if (pos_ >= n_) fail_at(n_, "ends without STOP");
      op_ = pos_;
      const uint8_t op = p_[pos_++];
      switch (op) {
        case PROTO: {
          uint8_t v = u8();
          if (v > 5) fail("unsupported pickle protocol " + std::to_string(v));
          break;
        }
        case FRAME: u64(); break;  // framing only groups bytes for buffered reading
        case STOP: return pop();
        case MARK:
          check_stack();
          marks_.push_back(stack_.size());
          break;
        case POP:
          if (stack_.size() > floor()) stack_.pop_back();
          else pop_mark();  // Python pops a MARK when the current stack is empty
          break;
        case POP_MARK: pop_mark(); break;
        case DUP: push(top()); break;

        case NONE: push(none_); break;
        case NEWTRUE: push(true_); break;
        case NEWFALSE: push(false_); break;
        case BININT: push_int(static_cast<int32_t>(u32())); break;
        case BININT1: push_int(u8()); break;
        case BININT2: push_int(u16()); break;
        case LONG1: push_long(u8()); break;
        case LONG4: {
          int32_t len = static_cast<int32_t>(u32());
          if (len < 0) fail("negative LONG4 length");
          push_long(static_cast<size_t>(len));
          break;
        }
        case BINFLOAT: {
          uint64_t bits = 0;
          const uint8_t* b = take(8);
          for (int k = 0; k < 8; ++k) bits = (bits << 8) | b[k];  // big-endian IEEE 754
          Value v{Kind::Float, 0, 0, {}, {}};
          std::memcpy(&v.f, &bits, 8);
          push(make(std::move(v)));
          break;
        }

        case BINUNICODE: push_string(u32(), Kind::String); break;
        case SHORT_BINUNICODE: push_string(u8(), Kind::String); break;
        case BINUNICODE8: push_string(u64(), Kind::String); break;
        case BINSTRING: {
          int32_t len = static_cast<int32_t>(u32());
          if (len < 0) fail("negative BINSTRING length");
          push_string(static_cast<uint64_t>(len), Kind::Bytes);
          break;
        }
        case SHORT_BINSTRING: push_string(u8(), Kind::Bytes); break;
        case BINBYTES: push_string(u32(), Kind::Bytes); break;
        case SHORT_BINBYTES: push_string(u8(), Kind::Bytes); break;
        case BINBYTES8: push_string(u64(), Kind::Bytes); break;
        case BYTEARRAY8: push_string(u64(), Kind::Bytes); break;

        case EMPTY_TUPLE: push(make_container(Kind::Tuple, {})); break;
        case TUPLE1: {
          ValueId a = pop();
          push(make_container(Kind::Tuple, {a}));
          break;
        }
        case TUPLE2: {
          ValueId b = pop(), a = pop();
          push(make_container(Kind::Tuple, {a, b}));
          break;
        }
        case TUPLE3: {
          ValueId c = pop(), b = pop(), a = pop();
          push(make_container(Kind::Tuple, {a, b, c}));
          break;
        }
        case TUPLE: push(make_container(Kind::Tuple, pop_mark())); break;
        case EMPTY_LIST: push(make_container(Kind::List, {})); break;
        case LIST: push(make_container(Kind::List, pop_mark())); break;
        case EMPTY_SET: push(make_container(Kind::List, {})); break;
        case FROZENSET: push(make_container(Kind::List, pop_mark())); break;
        case EMPTY_DICT: push(make_container(Kind::Dict, {})); break;
        case DICT: {
          auto items = pop_mark();
          if (items.size() % 2) fail("DICT with an odd number of items");
          push(make_container(Kind::Dict, std::move(items)));
          break;
        }

        case APPEND: {
          ValueId v = pop();
          add_items(top(), Kind::List, {v}, "APPEND");
          break;
        }
        case APPENDS: {
          auto items = pop_mark();
          add_items(top(), Kind::List, std::move(items), "APPENDS");
          break;
        }
        case ADDITEMS: {
          auto items = pop_mark();
          add_items(top(), Kind::List, std::move(items), "ADDITEMS");
          break;
        }
        case SETITEM: {
          ValueId v = pop(), k = pop();
          add_items(top(), Kind::Dict, {k, v}, "SETITEM");
          break;
        }
        case SETITEMS: {
          auto items = pop_mark();
          if (items.size() % 2) fail("SETITEMS with an odd number of items");
          add_items(top(), Kind::Dict, std::move(items), "SETITEMS");
          break;
        }

        case BINPUT: put(u8()); break;
        case LONG_BINPUT: put(u32()); break;
        case MEMOIZE: put(memo_.size()); break;
        case BINGET: get(u8()); break;
        case LONG_BINGET: get(u32()); break;

        case GLOBAL: {
          std::string module = line(), name = line();
          push_global(module, name);
          break;
        }
        case STACK_GLOBAL: {
          ValueId name = pop(), module = pop();
          if (g_[module].kind != Kind::String || g_[name].kind != Kind::String) fail("STACK_GLOBAL needs two strings");
          // Length first: the strings may be huge and reached many times through the memo.
          if (g_[module].s.size() > lim_.max_global_len || g_[name].s.size() > lim_.max_global_len) fail("global name too long");
          push_global(g_[module].s, g_[name].s);
          break;
        }
        case REDUCE: {
          ValueId args = pop(), fn = pop();
          push(call(fn, args, "REDUCE"));
          break;
        }
        case NEWOBJ: {
          ValueId args = pop(), cls = pop();
          push(call(cls, args, "NEWOBJ"));
          break;
        }
        case NEWOBJ_EX: {
          pop();  // keyword arguments: no class we model takes any
          ValueId args = pop(), cls = pop();
          push(call(cls, args, "NEWOBJ_EX"));
          break;
        }
        case BUILD: {
          pop();  // the state: attributes (e.g. a state_dict's `_metadata`), which we do not keep
          Kind k = g_[top()].kind;
          if (k != Kind::Dict && k != Kind::Opaque && k != Kind::Tensor && k != Kind::List)
            fail(std::string("BUILD on a ") + kind_name(k));
          break;
        }
        case BINPERSID: {
          ValueId pid = pop();
          ValueId v;
          try {
            v = hooks_.persistent_load(g_, pid);
          } catch (const FormatError& e) { throw FormatError(e.path(), e.problem() + at()); }
          check_values();
          push(v);
          break;
        }
        default: {
          static const char* hex = "0123456789abcdef";
          fail(std::string("unsupported pickle opcode 0x") + hex[op >> 4] + hex[op & 15]);
        }
      }
    }
  }

 private:
  // Suffix locating the current opcode, for errors raised by hooks (which do not know where they are).
  std::string at() const { return " (" + what_ + ", opcode at byte " + std::to_string(op_) + ")"; }
  [[noreturn]] void fail(const std::string& msg) const {
    throw FormatError(path_, what_ + ": " + msg + " (opcode at byte " + std::to_string(op_) + ")");
  }
  [[noreturn]] void fail_at(size_t where, const std::string& msg) const {
    throw FormatError(path_, what_ + ": " + msg + " (at byte " + std::to_string(where) + ")");
  }

  const uint8_t* take(uint64_t k) {
    if (k > n_ - pos_) fail("truncated: needs " + std::to_string(k) + " more bytes, " + std::to_string(n_ - pos_) + " left");
    const uint8_t* r = p_ + pos_;
    pos_ += static_cast<size_t>(k);
    return r;
  }
  uint64_t le(int bytes) {
    const uint8_t* b = take(bytes);
    uint64_t v = 0;
    for (int k = 0; k < bytes; ++k) v |= static_cast<uint64_t>(b[k]) << (8 * k);
    return v;
  }
  uint8_t u8() { return static_cast<uint8_t>(le(1)); }
  uint16_t u16() { return static_cast<uint16_t>(le(2)); }
  uint32_t u32() { return static_cast<uint32_t>(le(4)); }
  uint64_t u64() { return le(8); }

  // A GLOBAL argument: printable ASCII up to '\n', bounded in length.
  std::string line() {
    size_t end = pos_;
    while (end < n_ && p_[end] != '\n') {
      if (p_[end] < 0x20 || p_[end] >= 0x7f) fail("GLOBAL name with a non-printable byte");
      if (end - pos_ >= lim_.max_global_len) fail("GLOBAL name too long");
      ++end;
    }
    if (end >= n_) fail("truncated GLOBAL");
    std::string s(reinterpret_cast<const char*>(p_ + pos_), end - pos_);
    pos_ = end + 1;
    return s;
  }

  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void check_stack() {
    if (stack_.size() + marks_.size() >= lim_.max_stack) fail("pickle stack deeper than " + std::to_string(lim_.max_stack));
  }
  void push(ValueId v) {
    check_stack();
    stack_.push_back(v);
  }
  ValueId pop() {
    if (stack_.size() <= floor()) fail("stack underflow");
    ValueId v = stack_.back();
    stack_.pop_back();
    return v;
  }
  ValueId top() {
    if (stack_.size() <= floor()) fail("stack underflow");
    return stack_.back();
  }
  std::vector<ValueId> pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<ValueId> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }

  void check_values() {
    if (g_.size() > lim_.max_values) fail("more than " + std::to_string(lim_.max_values) + " objects");
  }
  ValueId make(Value v) {
    if (g_.size() >= lim_.max_values) fail("more than " + std::to_string(lim_.max_values) + " objects");
    return g_.add(std::move(v));
  }
  void count_items(size_t k) {
    items_ += k;
    if (items_ > lim_.max_items) fail("more than " + std::to_string(lim_.max_items) + " container items");
  }
  ValueId make_container(Kind kind, std::vector<ValueId> items) {
    count_items(items.size());
    Value v;
    v.kind = kind;
    v.items = std::move(items);
    return make(std::move(v));
  }
  // APPEND(S)/ADDITEMS into a list, SETITEM(S) into a dict. Items for an Opaque object (an instance of a
  // class we do not model, e.g. a dict subclass) are dropped, as is its state in BUILD.
  void add_items(ValueId target, Kind want, std::vector<ValueId> items, const char* opname) {
    Value& t = g_[target];
    if (t.kind == Kind::Opaque) return;
    if (t.kind != want) fail(std::string(opname) + " on a " + kind_name(t.kind));
    count_items(items.size());
    t.items.insert(t.items.end(), items.begin(), items.end());
  }

  void push_int(int64_t v) { push(make(Value{Kind::Int, v, 0, {}, {}})); }
  // LONG1/LONG4: little-endian two's complement of `len` bytes.
  void push_long(size_t len) {
    const uint8_t* b = take(len);
    if (len == 0) return push_int(0);
    const bool negative = b[len - 1] & 0x80;
    // Bytes beyond the 8th must be pure sign extension for the value to fit in int64.
    bool fits = true;
    for (size_t k = 8; k < len; ++k)
      if (b[k] != (negative ? 0xFF : 0x00)) fits = false;
    if (len > 8 && fits && (((b[7] & 0x80) != 0) != negative)) fits = false;
    if (!fits) return push(make(Value{Kind::BigInt, 0, 0, {}, {}}));
    uint64_t v = negative ? ~uint64_t{0} : 0;
    for (size_t k = 0; k < len && k < 8; ++k) {
      v &= ~(uint64_t{0xFF} << (8 * k));
      v |= static_cast<uint64_t>(b[k]) << (8 * k);
    }
    int64_t s;
    std::memcpy(&s, &v, 8);
    push_int(s);
  }
  void push_string(uint64_t len, Kind kind) {
    const uint8_t* b = take(len);
    if (kind == Kind::String && !valid_utf8(b, static_cast<size_t>(len))) fail("string is not valid UTF-8");
    Value v;
    v.kind = kind;
    v.s.assign(reinterpret_cast<const char*>(b), static_cast<size_t>(len));
    push(make(std::move(v)));
  }

  void put(uint64_t idx) {
    ValueId v = top();
    auto it = memo_.find(idx);
    if (it != memo_.end()) {
      it->second = v;
      return;
    }
    if (memo_.size() >= lim_.max_memo) fail("more than " + std::to_string(lim_.max_memo) + " memo entries");
    memo_.emplace(idx, v);
  }
  void get(uint64_t idx) {
    auto it = memo_.find(idx);
    if (it == memo_.end()) fail("memo key " + std::to_string(idx) + " was never stored");
    push(it->second);
  }

  void push_global(const std::string& module, const std::string& name) {
    try {
      hooks_.check_global(module, name);
    } catch (const FormatError& e) { throw FormatError(e.path(), e.problem() + at()); }
    Value v;
    v.kind = Kind::Global;
    v.s = module + "." + name;
    push(make(std::move(v)));
  }

  ValueId call(ValueId fn, ValueId args, const char* opname) {
    const Kind fk = g_[fn].kind;
    if (g_[args].kind != Kind::Tuple)
      fail(std::string(opname) + " arguments are a " + kind_name(g_[args].kind) + ", not a tuple");
    if (fk == Kind::Opaque) {
      // Calling something we do not model (e.g. a method of an opaque object) yields another opaque thing.
      Value v;
      v.kind = Kind::Opaque;
      v.s = g_[fn].s;
      return make(std::move(v));
    }
    if (fk != Kind::Global) fail(std::string(opname) + " of a " + kind_name(fk) + ", which is not callable");
    ValueId r;
    try {
      r = hooks_.call(g_, fn, args);
    } catch (const FormatError& e) { throw FormatError(e.path(), e.problem() + at()); }
    check_values();
    return r;
  }

  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0, op_ = 0;
  Graph& g_;
  Hooks& hooks_;
  const std::string& path_;
  const std::string& what_;
  const Limits& lim_;
  std::vector<ValueId> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ValueId> memo_;
  size_t items_ = 0;
  ValueId none_ = 0, true_ = 0, false_ = 0;
};

}  // namespace detail

ValueId unpickle(const uint8_t* data, size_t size, Graph& g, Hooks& hooks, const std::string& path, const std::string& what,
                 const Limits& limits) {
  return detail::Machine(data, size, g, hooks, path, what, limits).run();
}

}  // namespace vocablens::pickle
