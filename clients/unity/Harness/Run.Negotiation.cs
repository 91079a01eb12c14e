// The negotiation part of a harness run: the polite learner haggles to a deal while the
// player's socket is broken twice (see Program.cs), then every count is checked against the
// server's own record.

using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;
using Samvad.Client;

namespace Samvad.Harness
{
    sealed partial class Run
    {
        async Task NegotiateAsync(SamvadApi api, SessionInfo info, SamvadClient player, Recorder seen)
        {
            var learner = new PoliteLearner();
            var sent = new List<PendingFrame>();
            var replyFor = new Dictionary<string, ReplyEvent>();
            ReplyEvent last = null;
            PendingFrame deafFrame = null;
            PendingFrame droppedFrame = null;
            for (int turn = 1; turn <= 14; turn++)
            {
                string line = learner.Next(last);
                Log("turn " + turn + " learner: " + line);
                PendingFrame frame;
                if (turn == 2)
                {
                    // Drop 1: the socket dies right behind the transcript.
                    frame = player.SendTranscript(line, 0.93, "hi-EN");
                    player.ForceDrop();
                    droppedFrame = frame;
                }
                else if (turn == 3)
                {
                    frame = await DeafDropAsync(api, info, player, seen, line, turn).ConfigureAwait(false);
                    deafFrame = frame;
                }
                else
                {
                    frame = player.SendTranscript(line, 0.95, "hi-EN");
                }
                sent.Add(frame);
                var reply = await Within(frame.Reply, Step, "the reply to turn " + turn).ConfigureAwait(false);
                await Within(frame.Acked, Step, "the ack of turn " + turn).ConfigureAwait(false);
                replyFor[frame.Id] = reply;
                last = reply;
                Log(string.Format("turn {0} vendor: {1} | {2} happiness {3} quote {4}", reply.Turn, reply.Text,
                                  reply.NegotiationState, reply.HappinessScore, reply.CounterPrice));
                Check(reply.InReplyTo == frame.Id, "reply " + reply.Turn + " answers " + reply.InReplyTo + ", not " + frame.Id);
                if (reply.IsTerminal) break;
            }

            // Let the events that follow the last reply (mood, stage, session.ended) arrive.
            var settle = DateTime.UtcNow + TimeSpan.FromSeconds(5);
            while ((seen.Ended == null || seen.Report == null || seen.TipsCopy().Count < seen.RepliesCopy().Count)
                   && DateTime.UtcNow < settle)
            {
                await Task.Delay(25).ConfigureAwait(false);
            }

            var stats = player.Stats;
            var replies = seen.RepliesCopy();
            var turns = replies.Select(r => r.Turn).ToList();
            int turnCount = turns.Count == 0 ? 0 : turns.Max();
            var missed = Enumerable.Range(1, turnCount).Where(t => !turns.Contains(t)).ToList();
            var doubled = turns.GroupBy(t => t).Where(g => g.Count() > 1).Select(g => g.Key).ToList();
            var answeredTwice = replies.Where(r => r.InReplyTo != null).GroupBy(r => r.InReplyTo)
                                       .Where(g => g.Count() > 1).Select(g => g.Key).ToList();
            string problem;
            bool contiguous = seen.Contiguous(out problem);
            Check(contiguous, "player: " + problem);
            Check(missed.Count == 0, "missed turns: " + string.Join(",", missed));
            Check(doubled.Count == 0, "turns applied twice: " + string.Join(",", doubled));
            Check(answeredTwice.Count == 0, "transcripts answered twice: " + string.Join(",", answeredTwice));
            Check(turnCount == sent.Count, turnCount + " turns for " + sent.Count + " transcripts");
            var tips = seen.TipsCopy();
            Check(tips.Select(t => t.Turn).SequenceEqual(Enumerable.Range(1, turnCount)),
                  "tips for turns " + string.Join(",", tips.Select(t => t.Turn)) + ", expected 1.." + turnCount);
            Check(tips.All(t => t.Cards != null && t.Cards.Count >= 1 && t.Cards.Count <= 6), "a tips event without 1-6 cards");
            Check(tips.Any(t => t.Cards.Any(c => c.Grounded && c.SourceChunkIds != null && c.SourceChunkIds.Count > 0)),
                  "no grounded card in " + tips.Count + " turns");
            Check(player.LatestTips != null && player.LatestTips.Turn == turnCount, "LatestTips is not the last turn's");
            var report = player.LearnerReport;
            Check(report != null && report.Outcome == Outcomes.Deal && report.Turns == turnCount,
                  "the learner report is missing or does not match the end");
            Check(report != null && report.Suggestions != null && report.Suggestions.Count == 3, "the report has not 3 suggestions");
            Fact("report_score", report == null ? -1 : report.Score);
            Check(player.PendingCount == 0, player.PendingCount + " frames never acknowledged");
            Check(seen.Ended != null && seen.Ended.Outcome == Outcomes.Deal,
                  "outcome " + (seen.Ended == null ? "none" : seen.Ended.Outcome) + ", expected deal");
            Check(stats.Reconnects >= 2, "only " + stats.Reconnects + " reconnects");
            Check(stats.Snapshots == 0, "the server answered a resume with a snapshot");

            // Drop 2 is deterministic: the server had applied the transcript, so the re-send is a duplicate,
            // and its reply (thrown away by the deaf client) came back through `resume`.
            AckResult deafAck = deafFrame.Acked.Result;
            Check(deafAck.Duplicate, "the re-sent transcript of the deaf drop was not acked as a duplicate");
            Check(deafAck.Attempts == 2, "the deaf-drop transcript went out " + deafAck.Attempts + " times, expected 2");
            AckResult droppedAck = droppedFrame.Acked.Result;

            // The server's own record must agree with what the client applied.
            var state = await Within(api.GetSessionAsync(info.SessionId, info.PlayerToken), Step, "GET the session")
                              .ConfigureAwait(false);
            Check(state.Seq == player.LastSeq, "server seq " + state.Seq + " but the client applied up to " + player.LastSeq);
            Check(state.Turn == turnCount, "server counted " + state.Turn + " turns, the client " + turnCount);
            Check(state.Outcome == Outcomes.Deal, "server outcome " + state.Outcome);
            var local = player.State;
            Check(local != null && local.Stage == state.Stage && local.HappinessScore == state.HappinessScore,
                  "the client's folded state differs from the server's");

            var seqs = seen.Seqs();
            Fact("turns", turnCount);
            Fact("outcome", seen.Ended != null ? seen.Ended.Outcome : null);
            Fact("final_price", seen.Ended != null && seen.Ended.Summary != null && seen.Ended.Summary.FinalPrice.HasValue
                                    ? (JToken)seen.Ended.Summary.FinalPrice.Value : JValue.CreateNull());
            Fact("first_quote", state.FirstQuote.HasValue ? (JToken)state.FirstQuote.Value : JValue.CreateNull());
            Fact("reconnects", stats.Reconnects);
            Fact("duplicates", stats.DuplicateAcks);
            Fact("resent", stats.FramesResent);
            Fact("resumes", stats.ResumesSent);
            Fact("stale_dropped", stats.StaleEventsDropped);
            Fact("gap_dropped", stats.GapEventsDropped);
            Fact("drop1", new JObject { { "frame", droppedFrame.Id }, { "duplicate", droppedAck.Duplicate },
                                        { "attempts", droppedAck.Attempts } });
            Fact("drop2", new JObject { { "frame", deafFrame.Id }, { "duplicate", deafAck.Duplicate },
                                        { "attempts", deafAck.Attempts } });
            Fact("seq", new JObject
            {
                { "welcome", seen.WelcomeSeq },
                { "first", seqs.Count > 0 ? seqs[0] : 0 },
                { "last", player.LastSeq },
                { "applied", seqs.Count },
                { "contiguous", contiguous },
            });
            Fact("missed_turns", new JArray(missed.ToArray()));
            Fact("doubled_turns", new JArray(doubled.ToArray()));
            Fact("deltas", seen.Deltas);
            var errors = seen.ErrorsCopy();
            Check(errors.Count == 0, "player errors: " + string.Join("; ", errors));
            Fact("dialogue", new JArray(replies.Select(r => (JToken)string.Format("{0}:{1}:{2}", r.Turn, r.NegotiationState,
                                                                                     r.CounterPrice)).ToArray()));
        }

        /// <summary>Drop 2: the client goes deaf, the server applies and answers the transcript, then
        /// the socket is aborted. Returns the transcript's pending frame.</summary>
        async Task<PendingFrame> DeafDropAsync(SamvadApi api, SessionInfo info, SamvadClient player, Recorder seen,
                                               string line, int turn)
        {
            // Wait until drop 1 is healed, so that this drop breaks a live connection.
            var heal = DateTime.UtcNow + Step;
            while (!player.IsConnected && DateTime.UtcNow < heal)
            {
                await Task.Delay(20).ConfigureAwait(false);
            }
            player.DebugDiscardIncoming = true;
            var frame = player.SendTranscript(line, 0.9, "hi-EN");
            var deadline = DateTime.UtcNow + Step;
            while (true)
            {
                var state = await api.GetSessionAsync(info.SessionId, info.PlayerToken).ConfigureAwait(false);
                // The server counts a turn once its reply is out: the deaf client has thrown it away.
                if (state.Turn >= turn) break;
                if (DateTime.UtcNow > deadline) throw new TimeoutException("the server never answered the deaf turn");
                await Task.Delay(20).ConfigureAwait(false);
            }
            Check(!frame.Acked.IsCompleted && !frame.Reply.IsCompleted, "the deaf client heard its ack or reply");
            // The client hears again by itself once this socket is gone, before it reconnects.
            player.ForceDrop();
            return frame;
        }
    }
}
