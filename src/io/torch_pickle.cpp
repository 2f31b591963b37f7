// A whitelist pickle interpreter for torch.save's state dicts.
#include "io/torch_pickle.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <utility>

namespace pagoda {

namespace {

enum class GlobalKind { kOrderedDict, kRebuildTensor, kRebuildParameter, kStorageType };

struct StorageType {
  const char* name;
  DType dtype;
};
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", DType::kF32}, {"HalfStorage", DType::kF16}, {"BFloat16Storage", DType::kBF16},
    {"IntStorage", DType::kI32},   {"LongStorage", DType::kI64}, {"BoolStorage", DType::kU8},
    {"ByteStorage", DType::kU8},   {"CharStorage", DType::kI8},
};

struct Value;
using Ref = std::shared_ptr<Value>;

// A pickled value: only the kinds a state dict is made of.
struct Value {
  enum class Kind { kNone, kBool, kInt, kStr, kTuple, kDict, kGlobal, kStorage, kTensor };
  Kind kind = Kind::kNone;
  int64_t i = 0;                          // kBool, kInt
  std::string s;                          // kStr; kGlobal / kStorage: the storage type name
  std::vector<Ref> items;                 // kTuple
  std::vector<std::pair<Ref, Ref>> dict;  // kDict, in insertion order
  GlobalKind global{};                    // kGlobal
  DType dtype = DType::kF32;              // kGlobal of a storage type, kStorage
  TorchTensorRecord tensor;               // kStorage (storage fields), kTensor
  int depth = 0;                          // kTuple: 1 + its deepest tuple item's depth
};

// Bounds on what a pickle may build. A state dict's deepest tuple is
// _rebuild_tensor_v2's arguments holding its size tuple (2), and it makes
// ~15 values a tensor: 16 levels and 1M values (~65k tensors) are far past
// any checkpoint, while a nested tuple chain (one byte a level, freed
// recursively) or a stream of 1-byte values (~300 bytes each here) would
// otherwise overflow the stack or exhaust memory.
constexpr int kMaxTupleDepth = 16;
constexpr size_t kMaxValues = size_t{1} << 20;

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kStr:
      return "str";
    case Value::Kind::kTuple:
      return "tuple";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kGlobal:
      return "global";
    case Value::Kind::kStorage:
      return "storage";
    case Value::Kind::kTensor:
      return "tensor";
  }
  return "?";
}

class PickleMachine {
 public:
  PickleMachine(const uint8_t* data, size_t size, std::string name)
      : p_(data), size_(size), name_(std::move(name)) {}
  // A pickle may put a dict inside itself (through the memo): emptying every
  // dict breaks such cycles so that all values are freed.
  ~PickleMachine() {
    for (const Ref& d : dicts_) d->dict.clear();
  }
  PickleMachine(const PickleMachine&) = delete;
  PickleMachine& operator=(const PickleMachine&) = delete;

  Result<Ref> run() {
    while (true) {
      if (at_ >= size_) return corrupt("ends before STOP (truncated?)");
      op_at_ = at_;
      const uint8_t op = p_[at_++];
      if (op == '.') {
        if (stack_.size() != 1)
          return corrupt("STOP with " + std::to_string(stack_.size()) + " values on the stack");
        return stack_.back();
      }
      PAGODA_RETURN_IF_ERROR(step(op));
      if (num_values_ > kMaxValues)
        return corrupt("makes over " + std::to_string(kMaxValues) +
                       " values (no state dict needs as many)");
    }
  }

 private:
  Status step(uint8_t op) {
    // One opcode a line.
    // clang-format off
    switch (op) {
      case 0x80: return skip(1);                                  // PROTO
      case 0x95: return skip(8);                                  // FRAME
      case '(': marks_.push_back(stack_.size()); return Status::Ok();  // MARK
      case '}': return push(new_dict());                          // EMPTY_DICT
      case ')': return push_tuple(make(Value::Kind::kTuple));     // EMPTY_TUPLE
      case 'N': return push(make(Value::Kind::kNone));            // NONE
      case 0x88: return push_bool(true);                          // NEWTRUE
      case 0x89: return push_bool(false);                         // NEWFALSE
      case 'K': return push_int(1, false);                        // BININT1
      case 'M': return push_int(2, false);                        // BININT2
      case 'J': return push_int(4, true);                         // BININT
      case 0x8a: return long1();                                  // LONG1
      case 'X': return unicode(4);                                // BINUNICODE
      case 0x8c: return unicode(1);                               // SHORT_BINUNICODE
      case 't': return tuple_from_mark();                         // TUPLE
      case 0x85: return tuple_of(1);                              // TUPLE1
      case 0x86: return tuple_of(2);                              // TUPLE2
      case 0x87: return tuple_of(3);                              // TUPLE3
      case 'c': return global();                                  // GLOBAL
      case 0x93: return stack_global();                           // STACK_GLOBAL
      case 'Q': return persistent_id();                           // BINPERSID
      case 'R': return reduce();                                  // REDUCE
      case 's': return setitem();                                 // SETITEM
      case 'u': return setitems();                                // SETITEMS
      case 'b': return build();                                   // BUILD
      case 'q': return memo_put(1);                               // BINPUT
      case 'r': return memo_put(4);                               // LONG_BINPUT
      case 0x94: return memo_put(0);                              // MEMOIZE
      case 'h': return memo_get(1);                               // BINGET
      case 'j': return memo_get(4);                               // LONG_BINGET
      default:
        return make_error(ErrorCode::kUnsupported,
                          fmt::format("{}: pickle opcode 0x{:02x} at byte {} is not one a "
                                      "PyTorch state dict uses; refused",
                                      name_, op, op_at_));
    }
    // clang-format on
  }

  Error corrupt(const std::string& what) const {
    return make_error(ErrorCode::kCorrupt,
                      fmt::format("{}: pickle {} (opcode at byte {})", name_, what, op_at_));
  }

  Status need(size_t n) const {
    if (n > size_ - at_) return corrupt("ends inside an argument (truncated?)");
    return Status::Ok();
  }
  Status skip(size_t n) {
    PAGODA_RETURN_IF_ERROR(need(n));
    at_ += n;
    return Status::Ok();
  }
  uint64_t read_le(size_t n) {  // callers check need(n) first
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(p_[at_ + k]) << (8 * k);
    at_ += n;
    return v;
  }

  // Every value is made here, so that run() can bound their count.
  Ref make(Value::Kind kind) {
    ++num_values_;
    auto v = std::make_shared<Value>();
    v->kind = kind;
    return v;
  }
  Ref new_dict() {
    dicts_.push_back(make(Value::Kind::kDict));
    return dicts_.back();
  }
  Status push(Ref v) {
    stack_.push_back(std::move(v));
    return Status::Ok();
  }
  Result<Ref> pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back()))
      return corrupt("pops an empty stack");
    Ref v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  Status push_bool(bool b) {
    Ref v = make(Value::Kind::kBool);
    v->i = b;
    return push(v);
  }
  Status push_int(size_t n, bool is_signed) {
    PAGODA_RETURN_IF_ERROR(need(n));
    uint64_t u = read_le(n);
    Ref v = make(Value::Kind::kInt);
    v->i = is_signed ? static_cast<int64_t>(static_cast<int32_t>(u)) : static_cast<int64_t>(u);
    return push(v);
  }
  Status long1() {
    PAGODA_RETURN_IF_ERROR(need(1));
    const size_t n = p_[at_++];
    if (n > 8) return corrupt("LONG1 of " + std::to_string(n) + " bytes (over 64 bits)");
    PAGODA_RETURN_IF_ERROR(need(n));
    uint64_t u = read_le(n);
    if (n > 0 && n < 8 && (u >> (8 * n - 1)) & 1) u |= ~uint64_t{0} << (8 * n);  // sign-extend
    Ref v = make(Value::Kind::kInt);
    v->i = static_cast<int64_t>(u);
    return push(v);
  }
  Status unicode(size_t len_bytes) {
    PAGODA_RETURN_IF_ERROR(need(len_bytes));
    const uint64_t n = read_le(len_bytes);
    PAGODA_RETURN_IF_ERROR(need(n));
    Ref v = make(Value::Kind::kStr);
    v->s.assign(reinterpret_cast<const char*>(p_ + at_), n);
    at_ += n;
    return push(v);
  }

  Result<std::vector<Ref>> pop_to_mark() {
    if (marks_.empty()) return corrupt("needs a MARK and has none");
    std::vector<Ref> out(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return out;
  }
  Status tuple_from_mark() {
    PAGODA_ASSIGN_OR_RETURN(std::vector<Ref> items, pop_to_mark());
    Ref t = make(Value::Kind::kTuple);
    t->items = std::move(items);
    return push_tuple(std::move(t));
  }
  Status tuple_of(size_t n) {
    Ref t = make(Value::Kind::kTuple);
    t->items.resize(n);
    for (size_t k = n; k-- > 0;) {
      PAGODA_ASSIGN_OR_RETURN(t->items[k], pop());
    }
    return push_tuple(std::move(t));
  }
  // Tuples are immutable once made, so their depth is final here (dicts,
  // which may change later, are emptied flat at the end and not counted).
  Status push_tuple(Ref t) {
    for (const Ref& x : t->items) t->depth = std::max(t->depth, x->depth);
    if (++t->depth > kMaxTupleDepth)
      return corrupt("nests tuples over " + std::to_string(kMaxTupleDepth) + " deep");
    return push(std::move(t));
  }

  Result<std::string> line() {
    size_t end = at_;
    while (end < size_ && p_[end] != '\n') ++end;
    if (end == size_) return corrupt("GLOBAL ends without a newline (truncated?)");
    std::string s(reinterpret_cast<const char*>(p_ + at_), end - at_);
    at_ = end + 1;
    return s;
  }
  Status global() {
    PAGODA_ASSIGN_OR_RETURN(std::string module, line());
    PAGODA_ASSIGN_OR_RETURN(std::string qualname, line());
    return push_global(module, qualname);
  }
  Status stack_global() {
    PAGODA_ASSIGN_OR_RETURN(Ref qualname, pop());
    PAGODA_ASSIGN_OR_RETURN(Ref module, pop());
    if (module->kind != Value::Kind::kStr || qualname->kind != Value::Kind::kStr)
      return corrupt("STACK_GLOBAL of non-strings");
    return push_global(module->s, qualname->s);
  }
  // Only the whitelisted globals become values; nothing is ever imported.
  Status push_global(const std::string& module, const std::string& qualname) {
    Ref g = make(Value::Kind::kGlobal);
    if (module == "collections" && qualname == "OrderedDict") {
      g->global = GlobalKind::kOrderedDict;
    } else if (module == "torch._utils" && qualname == "_rebuild_tensor_v2") {
      g->global = GlobalKind::kRebuildTensor;
    } else if (module == "torch._utils" && qualname == "_rebuild_parameter") {
      g->global = GlobalKind::kRebuildParameter;
    } else if (std::optional<DType> t =
                   module == "torch" ? storage_dtype(qualname) : std::nullopt) {
      g->global = GlobalKind::kStorageType;
      g->dtype = *t;
      g->s = qualname;
    } else {
      return make_error(
          ErrorCode::kUnsupported,
          fmt::format("{}: pickle global {}.{} (at byte {}) is not one a PyTorch "
                      "state dict of f32 / f16 / bf16 / integer tensors uses; refused",
                      name_, module, qualname, op_at_));
    }
    return push(g);
  }
  static std::optional<DType> storage_dtype(const std::string& name) {
    for (const StorageType& t : kStorageTypes)
      if (name == t.name) return t.dtype;
    return std::nullopt;
  }

  // ('storage', storage type, key, location, numel) -> a storage.
  Status persistent_id() {
    PAGODA_ASSIGN_OR_RETURN(Ref pid, pop());
    const auto& it = pid->items;
    if (pid->kind != Value::Kind::kTuple || it.size() != 5 || it[0]->kind != Value::Kind::kStr ||
        it[0]->s != "storage" || it[1]->kind != Value::Kind::kGlobal ||
        it[1]->global != GlobalKind::kStorageType || it[2]->kind != Value::Kind::kStr ||
        it[4]->kind != Value::Kind::kInt || it[4]->i < 0) {
      return corrupt("persistent id is not ('storage', type, key, location, numel)");
    }
    Ref s = make(Value::Kind::kStorage);
    s->tensor.storage_type = it[1]->s;
    s->tensor.dtype = it[1]->dtype;
    s->tensor.storage_key = it[2]->s;
    s->tensor.storage_numel = it[4]->i;
    return push(s);
  }

  Status reduce() {
    PAGODA_ASSIGN_OR_RETURN(Ref args, pop());
    PAGODA_ASSIGN_OR_RETURN(Ref fn, pop());
    if (fn->kind != Value::Kind::kGlobal || args->kind != Value::Kind::kTuple)
      return corrupt(
          fmt::format("REDUCE of a {} with {}", kind_name(fn->kind), kind_name(args->kind)));
    switch (fn->global) {
      case GlobalKind::kOrderedDict:
        if (!args->items.empty()) return corrupt("OrderedDict called with arguments");
        return push(new_dict());
      case GlobalKind::kRebuildTensor:
        return rebuild_tensor(args->items);
      case GlobalKind::kRebuildParameter:
        if (args->items.empty() || args->items[0]->kind != Value::Kind::kTensor)
          return corrupt("_rebuild_parameter without a tensor");
        return push(args->items[0]);
      case GlobalKind::kStorageType:
        break;
    }
    return corrupt("calls storage type " + fn->s);
  }
  static bool is_int_tuple(const Ref& v) {
    if (v->kind != Value::Kind::kTuple) return false;
    for (const Ref& x : v->items)
      if (x->kind != Value::Kind::kInt) return false;
    return true;
  }
  Status rebuild_tensor(const std::vector<Ref>& a) {
    if (a.size() < 6 || a.size() > 7 || a[0]->kind != Value::Kind::kStorage ||
        a[1]->kind != Value::Kind::kInt || !is_int_tuple(a[2]) || !is_int_tuple(a[3]) ||
        a[2]->items.size() != a[3]->items.size() || a[5]->kind != Value::Kind::kDict ||
        !a[5]->dict.empty()) {
      return corrupt(
          "_rebuild_tensor_v2 arguments are not (storage, offset, size, stride, "
          "requires_grad, {}) with as many sizes as strides");
    }
    // torch.save appends a 7th argument only for tensors with metadata
    // (torch._utils.get_tensor_metadata) that would change the tensor.
    if (a.size() == 7 && !(a[6]->kind == Value::Kind::kNone ||
                           (a[6]->kind == Value::Kind::kDict && a[6]->dict.empty()))) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("{}: a tensor carries _rebuild_tensor_v2 metadata (a {}; at "
                                    "byte {}), which pagoda does not apply; refused",
                                    name_, kind_name(a[6]->kind), op_at_));
    }
    Ref t = make(Value::Kind::kTensor);
    t->tensor = a[0]->tensor;
    t->tensor.storage_offset = a[1]->i;
    for (const Ref& x : a[2]->items) t->tensor.shape.push_back(x->i);
    for (const Ref& x : a[3]->items) t->tensor.stride.push_back(x->i);
    return push(t);
  }

  Status set_into(Value& dict, Ref key, Ref value) {
    if (dict.kind != Value::Kind::kDict)
      return corrupt(std::string("SETITEM on a ") + kind_name(dict.kind));
    dict.dict.emplace_back(std::move(key), std::move(value));
    return Status::Ok();
  }
  Status setitem() {
    PAGODA_ASSIGN_OR_RETURN(Ref value, pop());
    PAGODA_ASSIGN_OR_RETURN(Ref key, pop());
    if (stack_.empty()) return corrupt("SETITEM without a dict");
    return set_into(*stack_.back(), std::move(key), std::move(value));
  }
  Status setitems() {
    PAGODA_ASSIGN_OR_RETURN(std::vector<Ref> kv, pop_to_mark());
    if (stack_.empty() || kv.size() % 2 != 0)
      return corrupt("SETITEMS without a dict or with an odd count");
    for (size_t k = 0; k < kv.size(); k += 2)
      PAGODA_RETURN_IF_ERROR(set_into(*stack_.back(), kv[k], kv[k + 1]));
    return Status::Ok();
  }
  // Attributes are not set (state_dict()'s _metadata carries no tensor).
  Status build() {
    PAGODA_ASSIGN_OR_RETURN(Ref state, pop());
    if (stack_.empty()) return corrupt("BUILD without an object");
    const Value& obj = *stack_.back();
    const bool empty = state->kind == Value::Kind::kNone ||
                       (state->kind == Value::Kind::kDict && state->dict.empty());
    const bool dict_attrs = obj.kind == Value::Kind::kDict && state->kind == Value::Kind::kDict;
    if (!empty && !dict_attrs) {
      return make_error(
          ErrorCode::kUnsupported,
          fmt::format("{}: pickle BUILD of a {} with a {} state (at byte {}); refused", name_,
                      kind_name(obj.kind), kind_name(state->kind), op_at_));
    }
    return Status::Ok();
  }

  Status memo_put(size_t n) {
    PAGODA_RETURN_IF_ERROR(need(n));
    const uint64_t key = n == 0 ? memo_.size() : read_le(n);
    if (stack_.empty()) return corrupt("memoizes an empty stack");
    memo_[key] = stack_.back();
    return Status::Ok();
  }
  Status memo_get(size_t n) {
    PAGODA_RETURN_IF_ERROR(need(n));
    const uint64_t key = read_le(n);
    auto it = memo_.find(key);
    if (it == memo_.end()) return corrupt("gets memo " + std::to_string(key) + ", never put");
    return push(it->second);
  }

  const uint8_t* p_;
  size_t size_;
  std::string name_;
  size_t at_ = 0;
  size_t op_at_ = 0;
  std::vector<Ref> stack_;
  std::vector<size_t> marks_;  // stack sizes at each open MARK
  std::map<uint64_t, Ref> memo_;
  std::vector<Ref> dicts_;  // every dict made, emptied at the end
  size_t num_values_ = 0;   // made by make(), bounded by kMaxValues
};

}  // namespace

Result<std::vector<TorchTensorRecord>> parse_torch_pickle(const uint8_t* data, size_t size,
                                                          const std::string& name) {
  PickleMachine machine(data, size, name);
  PAGODA_ASSIGN_OR_RETURN(Ref top, machine.run());
  if (top->kind != Value::Kind::kDict) {
    return make_error(
        ErrorCode::kUnsupported,
        fmt::format("{}: the pickle is a {}, not a state dict", name, kind_name(top->kind)));
  }
  std::vector<TorchTensorRecord> out;
  for (const auto& [key, value] : top->dict) {
    if (key->kind != Value::Kind::kStr || value->kind != Value::Kind::kTensor) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("{}: state dict entry '{}' is a {} -> {}, not a name -> tensor",
                                    name, key->kind == Value::Kind::kStr ? key->s : "?",
                                    kind_name(key->kind), kind_name(value->kind)));
    }
    TorchTensorRecord r = value->tensor;
    r.name = key->s;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace pagoda
