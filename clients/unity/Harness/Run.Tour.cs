// A short tour of one scenario pack: create a session of that pack (at a level, if given), say a
// few lines, and check that every reply comes, that each answered turn brings its coaching cards,
// and that the event stream has no hole. On the way the learner reports what was heard of each
// reply: the first reply that names a new price is cut off before the price (a barge-in, so the
// price must not bind), another is heard to the end. Then the coaching of Run.Coaching.cs: the
// refusals, unclear speech, repeat, three hints, undo, a silence, stop and the report's counts.
//   mono Harness.exe --url URL --scenario kyoto-antiques [--level beginner] --say "..." --say "..."

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
        public async Task TourAsync(string scenario, IList<string> lines, string level)
        {
            if (lines.Count < 2) throw new ArgumentException("a tour says at least two lines (one is taken back)");
            using (var api = Api())
            {
                var info = await api.CreateSessionAsync(new CreateSessionRequest
                {
                    Scenario = scenario, LearnerId = Learner("unity-tour-" + scenario), Level = level,
                }).ConfigureAwait(false);
                Fact("scenario", scenario);
                var player = new SamvadClient(_url, info.SessionId, info.PlayerToken, Options(false));
                var seen = new Recorder();
                seen.Attach(player);
                try
                {
                    var welcome = await Within(player.ConnectAsync(), Step, "connecting the player").ConfigureAwait(false);
                    string sessionLevel = welcome.State == null ? null : welcome.State.Level;
                    Check(sessionLevel == (level ?? Levels.Intermediate), "the session's level is " + sessionLevel);
                    Fact("level", sessionLevel);

                    // Nothing to take back yet: refused like any other frame, with the new code.
                    Fact("undo_before_turns", await RefusalAsync(player.Undo(), "an undo before any turn")
                                                   .ConfigureAwait(false));

                    var texts = new JArray();
                    var replies = new List<ReplyEvent>();
                    SessionState beforeLast = null;
                    JObject bargeIn = null, heardToEnd = null;
                    for (int i = 0; i < lines.Count; i++)
                    {
                        if (i == lines.Count - 1)
                        {
                            // The server's own record of the session before the turn that is undone below.
                            beforeLast = await Within(api.GetSessionAsync(info.SessionId, info.PlayerToken), Step,
                                                      "GET the session").ConfigureAwait(false);
                        }
                        int? quoteBefore = player.State.VendorQuote;
                        var frame = player.SendTranscript(lines[i], 0.95);
                        var reply = await Within(frame.Reply, Step, "the reply to " + lines[i]).ConfigureAwait(false);
                        texts.Add(reply.Text);
                        replies.Add(reply);
                        Log("vendor: " + reply.Text + " (quote " + reply.CounterPrice + ")");
                        Check(reply.IsTurn && reply.Turn == i + 1, "the reply to line " + (i + 1) + " is turn " + reply.Turn
                                                                     + " with mark " + reply.Mark);
                        // What the learner heard, before the next line: only the latest reply can be unbound.
                        if (bargeIn == null && reply.CounterPrice.HasValue && reply.CounterPrice != quoteBefore)
                        {
                            bargeIn = await BargeInAsync(player, seen, reply, quoteBefore).ConfigureAwait(false);
                        }
                        else if (heardToEnd == null)
                        {
                            heardToEnd = await HeardToEndAsync(player, seen, reply).ConfigureAwait(false);
                        }
                    }
                    Check(bargeIn != null, "no reply named a new price to barge in on");
                    Check(heardToEnd != null, "no reply was reported heard to the end");
                    Fact("barge_in", bargeIn);
                    Fact("heard_to_end", heardToEnd);

                    var settle = DateTime.UtcNow + TimeSpan.FromSeconds(5);
                    while (seen.TipsCopy().Count < lines.Count && DateTime.UtcNow < settle)
                    {
                        await Task.Delay(25).ConfigureAwait(false);
                    }
                    var tips = seen.TipsCopy();
                    string problem;
                    Check(seen.Contiguous(out problem), "tour: " + problem);
                    Check(tips.Count == lines.Count, tips.Count + " tips events for " + lines.Count + " turns");
                    Check(tips.All(t => t.Cards != null && t.Cards.Count >= 1), "a tips event without cards");
                    Check(seen.ErrorsCopy().Count == 1, "errors: " + string.Join("; ", seen.ErrorsCopy()));
                    Fact("replies", texts);
                    Fact("tips", tips.Count);
                    Fact("grounded_cards", tips.Sum(t => t.Cards.Count(c => c.Grounded)));
                    Fact("suggested", replies.Count(r => !string.IsNullOrEmpty(r.SuggestedUserResponse)));
                    Fact("suggested_english", replies.Count(r => !string.IsNullOrEmpty(r.SuggestedUserResponseEnglish)));

                    await CoachAsync(player, seen, replies, beforeLast).ConfigureAwait(false);

                    Check(seen.Contiguous(out problem), "tour, after the coaching: " + problem);
                    var refusals = seen.ErrorCodesCopy();
                    Fact("errors", new JArray(refusals.ToArray()));
                    Check(refusals.SequenceEqual(new[] { ErrorCodes.NothingToUndo, ErrorCodes.UnknownTurn,
                                                         ErrorCodes.HeardOutOfRange }),
                          "errors: " + string.Join("; ", seen.ErrorsCopy()));
                    Check(player.PendingCount == 0, player.PendingCount + " frames never acknowledged");
                    Fact("last_seq", player.LastSeq);
                }
                finally
                {
                    await player.CloseAsync().ConfigureAwait(false);
                    player.Dispose();
                }
            }
        }
    }
}
