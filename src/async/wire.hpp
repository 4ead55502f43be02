// The messages of asynchronous SGD, as they travel (u8 arrays, fixed layouts, this host's byte
// order: every rank of a job runs the same build). Point-to-point messages are matched by
// (communicator, sender, tag) and delivered in send order, which is all the protocol relies on.
//
//   worker w -> owner k     gradient   GradientHeader + shard k of w's gradient   (channel grads)
//   worker w -> rank 0      notice     PushNotice                                 (w's notice channel)
//   rank 0   -> owner k     command    Command, then for an apply its members     (channel grads)
//   owner k  -> worker w    reply      ReplyHeader + shard k of a version         (channel params)
#pragma once

#include <cstdint>

#include "../sharding/memory_plan.hpp"

namespace shardopt::async {

enum Tag : int { kGradientTag = 1, kCommandTag = 2, kMembersTag = 3, kReplyTag = 4, kNoticeTag = 5 };

// What a worker tells the clock keeper (rank 0) after pushing a step's gradient to the owners.
struct PushNotice {
    std::int32_t worker = 0;
    std::int32_t reserved = 0;
    std::int64_t seq = 0;     // the worker's pushes in this session, from 0
    std::int64_t label = 0;   // the clock the gradient is meant for
    std::int64_t version = 0; // the version it was computed on
    std::int64_t want = 0;    // the oldest version the worker's next step may use
    double loss = 0.0;        // the worker's (slice-weighted) loss of the step
};

// Before every gradient shard: which push it is (the owner checks it against the command).
struct GradientHeader {
    std::int64_t seq = 0;
    std::int64_t label = 0;
    std::int64_t version = 0;
    std::int64_t reserved = 0;
};

// The keeper's decisions, executed by every owner in the order sent.
enum class CommandKind : std::int32_t { apply = 1, serve = 2 };
struct Command {
    CommandKind kind = CommandKind::apply;
    std::int32_t worker = 0;   // serve: the worker handed the current version
    std::int64_t clock = 0;    // apply: the clock applied; serve: the version handed out
    std::int64_t members = 0;  // apply: gradients in the update (a Member array follows)
    std::int64_t label = 0;    // serve: the label of the worker's next step (the session's clocks: none)
};
struct Member {
    std::int32_t worker = 0;
    std::int32_t reserved = 0;
    std::int64_t seq = 0;
};

// Before every parameter shard handed to a worker. The keeper's own (rank 0's) reply also
// carries the session's account once the last version is handed out.
struct ReplyHeader {
    std::int64_t version = 0;
    std::int64_t label = 0; // the worker's next step, or the session's clock count when it is done
    double epoch_loss = 0.0;
    std::int64_t late_gradients = 0;
    std::int64_t skipped_clocks = 0;
    std::int32_t max_staleness = 0;
    std::int32_t max_lead = 0;
};

// The memory plan counts a session's message buffers with these sizes.
static_assert(sizeof(GradientHeader) == kAsyncGradientHeaderBytes && sizeof(ReplyHeader) == kAsyncReplyHeaderBytes,
              "src/sharding/memory_plan.hpp: kAsync*HeaderBytes must be the headers' sizes");

} // namespace shardopt::async
