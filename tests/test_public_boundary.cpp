// The public boundary, checked from a translation unit that includes only kiln.h, as a user's
// does: the user API is all there, and the library's state is not. Array nodes are opaque (their
// data, error and evaluation flags are unreachable), backends, Kernel IR and plans are not
// declared, stream resolution and the device hooks are internal, and ProfileScope keeps the
// executor's side private. The compile-fail checks in tests/boundary/ (run by ctest) cover
// what a static_assert cannot name, such as register_backend.
#include <gtest/gtest.h>

#include <memory>
#include <type_traits>
#include <utility>

#include "kiln.h"

// Declared here only to ask whether kiln.h defined them: a redeclaration is harmless, and the
// type stays incomplete unless kiln.h brought its definition.
namespace kiln {
class Backend;
struct Kernel;
class Plan;
class Buffer;
struct PlanRuntime;
struct ResolvedStream;
}  // namespace kiln

namespace {

template <typename T, typename = void>
struct is_complete : std::false_type {};
template <typename T>
struct is_complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};

// What a user might try on a node, if the node were reachable.
template <typename N, typename = void>
struct node_data_reachable : std::false_type {};
template <typename N>
struct node_data_reachable<N, std::void_t<decltype(std::declval<N&>().data)>> : std::true_type {};
template <typename N, typename = void>
struct node_error_reachable : std::false_type {};
template <typename N>
struct node_error_reachable<N, std::void_t<decltype(std::declval<N&>().error)>> : std::true_type {};
template <typename N, typename = void>
struct node_in_flight_reachable : std::false_type {};
template <typename N>
struct node_in_flight_reachable<N, std::void_t<decltype(std::declval<N&>().in_flight)>>
    : std::true_type {};

// Array members: the public ones (a control: the idiom does detect members) and removed ones.
template <typename A, typename = void>
struct has_shape : std::false_type {};
template <typename A>
struct has_shape<A, std::void_t<decltype(std::declval<const A&>().shape())>> : std::true_type {};
template <typename A, typename = void>
struct has_buffer : std::false_type {};
template <typename A>
struct has_buffer<A, std::void_t<decltype(std::declval<const A&>().buffer())>> : std::true_type {};

// ProfileScope: the user's side is public, the executor's is not.
template <typename P, typename = void>
struct has_events : std::false_type {};
template <typename P>
struct has_events<P, std::void_t<decltype(std::declval<const P&>().events())>> : std::true_type {};
template <typename P, typename = void>
struct has_record : std::false_type {};
template <typename P>
struct has_record<P, std::void_t<decltype(P::record(std::declval<const kiln::TaskEvent&>()))>>
    : std::true_type {};
template <typename P, typename = void>
struct has_active : std::false_type {};
template <typename P>
struct has_active<P, std::void_t<decltype(P::active())>> : std::true_type {};
template <typename P, typename = void>
struct has_events_member : std::false_type {};
template <typename P>
struct has_events_member<P, std::void_t<decltype(std::declval<P&>().events_)>> : std::true_type {};

using Node = std::remove_reference_t<decltype(*std::declval<kiln::Array>().node())>;

static_assert(!is_complete<Node>::value, "kiln.h must not define ArrayNode");
static_assert(!node_data_reachable<Node>::value, "node data must not be reachable from kiln.h");
static_assert(!node_error_reachable<Node>::value, "node error must not be reachable");
static_assert(!node_in_flight_reachable<Node>::value, "node in_flight must not be reachable");
static_assert(has_shape<kiln::Array>::value, "control: Array::shape() is public");
static_assert(!has_buffer<kiln::Array>::value, "Array::buffer() is internal (array_buffer)");

static_assert(!is_complete<kiln::Backend>::value, "Backend belongs to backends/extension.h");
static_assert(!is_complete<kiln::Kernel>::value, "Kernel IR belongs to backends/extension.h");
static_assert(!is_complete<kiln::Buffer>::value, "Buffer belongs to backends/extension.h");
static_assert(!is_complete<kiln::Plan>::value, "Plan is internal to the library");
static_assert(!is_complete<kiln::PlanRuntime>::value, "PlanRuntime is internal to the executor");
static_assert(!is_complete<kiln::ResolvedStream>::value, "stream resolution is internal");

static_assert(has_events<kiln::ProfileScope>::value, "control: ProfileScope::events() is public");
static_assert(!has_record<kiln::ProfileScope>::value, "recording is the executor's side");
static_assert(!has_active<kiln::ProfileScope>::value, "active() is the executor's side");
static_assert(!has_events_member<kiln::ProfileScope>::value, "the event list is private");

// The user API is all reachable through kiln.h alone.
TEST(PublicBoundary, UserApiWorksFromKilnHAlone) {
  using namespace kiln;
  Array x = arange(6, float32);
  Array y = softmax(reshape(x, {2, 3}), -1);
  auto f = compile([](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0]) + 1}; });
  Array z = f({x})[0];
  EXPECT_NEAR(z.to_vector<float>()[0], 2.0f, 1e-6);
  EXPECT_NEAR(sum(y).item<float>(), 2.0f, 1e-5);
  EXPECT_FALSE(devices().empty());
  EXPECT_EQ(default_stream(device("reference")).device, device("reference"));
  ProfileScope prof;
  eval(random::normal({4}, float32, random::key(1)) * 2.0f);
  EXPECT_FALSE(prof.events().empty());
}

}  // namespace
