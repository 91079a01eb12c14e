// The tour's coaching steps, through the client's commands and frames against the live server:
// playback (a barge-in before the price, a reply heard to the end, two refusals), unclear speech,
// repeat, three hints (levels 0, 1, 2), undo (the state before the turn), a silence (a nudge), and
// stop with the report's level, coaching counts and clamps. Each step records a fact for the
// summary line, which tests/test_unity_client.py reads.

using System;
using System.Collections.Generic;
using System.Globalization;
using System.Linq;
using System.Threading.Tasks;
using Newtonsoft.Json.Linq;
using Samvad.Client;

namespace Samvad.Harness
{
    sealed partial class Run
    {
        /// <summary>After the tour's lines: every coaching step in order.</summary>
        async Task CoachAsync(SamvadClient player, Recorder seen, List<ReplyEvent> replies, SessionState beforeLast)
        {
            var last = replies[replies.Count - 1];

            // Playback frames the server cannot apply are refused with their own codes.
            var refusals = new JArray();
            refusals.Add(await RefusalAsync(player.ReportPlayback(last.Turn + 5, 0, true), "a playback for an unknown turn")
                               .ConfigureAwait(false));
            refusals.Add(await RefusalAsync(player.ReportPlayback(last.Turn, last.Text.Length + 1, false),
                                            "a playback beyond the reply").ConfigureAwait(false));
            Fact("playback_refusals", refusals);

            // Unclear speech is asked again, and is not a turn.
            var mumble = player.SendTranscript("mmh... hm", 0.4);
            var asked = await Within(mumble.Reply, Step, "the answer to a mumble").ConfigureAwait(false);
            Check(asked.Mark == Marks.Clarify && !asked.IsTurn && asked.Turn == last.Turn,
                  "a mumble got mark " + asked.Mark + " at turn " + asked.Turn);
            Fact("clarify", asked.Text);

            // The last line again.
            var repeat = player.Repeat();
            var again = (RepeatEvent)await Within(repeat.Answer, Step, "the repeated line").ConfigureAwait(false);
            Check(again.Text == last.Text && again.InReplyTo == repeat.Id, "repeat said " + again.Text + ", not the last line");

            await HintsAsync(player, seen, last.Turn + 1).ConfigureAwait(false);
            await UndoAsync(player, seen, last.Turn, beforeLast).ConfigureAwait(false);
            await SilenceAsync(player, seen, last.Turn - 1).ConfigureAwait(false);
            await StopAsync(player, seen).ConfigureAwait(false);
        }

        /// <summary>A frame the server must refuse: returns the error code it was refused with.</summary>
        async Task<string> RefusalAsync(PendingFrame frame, string what)
        {
            try
            {
                await Within(frame.Acked, Step, what).ConfigureAwait(false);
                Fail(what + " was accepted");
                return null;
            }
            catch (SamvadFrameRejectedException ex)
            {
                Check(ex.Error.Id == frame.Id, what + ": the error names " + ex.Error.Id + ", not " + frame.Id);
                Check(frame.Answer == null || frame.Answer.IsFaulted, what + ": its answer did not fault");
                return ex.Error.Code;
            }
        }

        /// <summary>The learner cuts in before the price of `reply`: the price must not bind, and the
        /// quote from before the reply stands again.</summary>
        async Task<JObject> BargeInAsync(SamvadClient player, Recorder seen, ReplyEvent reply, int? quoteBefore)
        {
            int price = reply.CounterPrice.Value;
            int cut = PriceAt(reply.Text, price);
            var frame = player.ReportPlayback(reply.Turn, cut, true);
            var heard = (HeardEvent)await Within(frame.Answer, Step, "the heard event of a barge-in").ConfigureAwait(false);
            await Within(frame.Acked, Step, "the ack of a barge-in").ConfigureAwait(false);
            Check(heard.Turn == reply.Turn && heard.Interrupted && heard.HeardChars == cut && heard.InReplyTo == frame.Id,
                  "the barge-in was heard as turn " + heard.Turn + ", " + heard.HeardChars + " chars");
            Check(heard.HeardText == reply.Text.Substring(0, cut), "heard_text is " + heard.HeardText);
            Check(heard.QuoteUnbound, "the price " + price + " was cut off and still binds");
            Check(heard.VendorQuote == quoteBefore, "after the barge-in the quote is " + heard.VendorQuote
                                                      + ", before the reply it was " + quoteBefore);
            var state = player.State;
            Check(state.VendorQuote == heard.VendorQuote, "the client's quote is " + state.VendorQuote + " after the barge-in");
            Check(seen.HeardCopy().Count(h => h.InReplyTo == frame.Id) == 1, "the Heard event was not raised once");
            return new JObject
            {
                { "turn", heard.Turn }, { "price", price }, { "heard_chars", heard.HeardChars },
                { "heard_text", heard.HeardText }, { "interrupted", heard.Interrupted },
                { "quote_unbound", heard.QuoteUnbound }, { "quote_before", ToToken(quoteBefore) },
                { "vendor_quote", ToToken(heard.VendorQuote) }, { "client_quote", ToToken(state.VendorQuote) },
            };
        }

        /// <summary>A reply heard to the end: nothing is unbound.</summary>
        async Task<JObject> HeardToEndAsync(SamvadClient player, Recorder seen, ReplyEvent reply)
        {
            var frame = player.ReportPlayback(reply.Turn, reply.Text.Length, false);
            var heard = (HeardEvent)await Within(frame.Answer, Step, "the heard event of a whole reply").ConfigureAwait(false);
            await Within(frame.Acked, Step, "the ack of a whole reply's playback").ConfigureAwait(false);
            Check(heard.Turn == reply.Turn && !heard.Interrupted && heard.HeardText == reply.Text && !heard.QuoteUnbound,
                  "a reply heard to the end came back as " + heard.HeardChars + " chars, unbound " + heard.QuoteUnbound);
            Check(seen.HeardCopy().Count(h => h.InReplyTo == frame.Id) == 1, "the Heard event was not raised once");
            return new JObject
            {
                { "turn", heard.Turn }, { "heard_chars", heard.HeardChars }, { "interrupted", heard.Interrupted },
                { "quote_unbound", heard.QuoteUnbound },
            };
        }

        async Task HintsAsync(SamvadClient player, Recorder seen, int nextTurn)
        {
            string[] kinds = { HintKinds.Contextual, HintKinds.Structural, HintKinds.Reveal };
            var hints = new JArray();
            for (int level = 0; level < 3; level++)
            {
                var frame = player.Hint();
                var hint = (HintEvent)await Within(frame.Answer, Step, "hint " + level).ConfigureAwait(false);
                Check(hint.Level == level && hint.Kind == kinds[level] && hint.InReplyTo == frame.Id && !hint.Offered,
                      "hint " + level + " came as level " + hint.Level + " " + hint.Kind);
                Check(hint.Turn == nextTurn, "hint " + level + " is for turn " + hint.Turn + ", not " + nextTurn);
                Check(!string.IsNullOrEmpty(hint.Text) && !string.IsNullOrEmpty(hint.Situation), "hint " + level + " is empty");
                hints.Add(new JObject
                {
                    { "level", hint.Level }, { "kind", hint.Kind }, { "situation", hint.Situation },
                    { "text", hint.Text }, { "english", hint.English },
                });
            }
            Check(seen.HintsCopy().Count(h => !h.Offered) == 3, "HintReceived was not raised for each hint");
            Fact("hints", hints);
        }

        /// <summary>Takes back turn `turn`: the state must be the server's from before that turn.</summary>
        async Task UndoAsync(SamvadClient player, Recorder seen, int turn, SessionState before)
        {
            var frame = player.Undo();
            var undone = (UndoEvent)await Within(frame.Answer, Step, "the undo").ConfigureAwait(false);
            await Within(frame.Acked, Step, "the ack of the undo").ConfigureAwait(false);
            Check(undone.Turn == turn && undone.InReplyTo == frame.Id, "the undo took back turn " + undone.Turn);
            var expected = StateKey(before);
            var restored = StateKey(undone.State);
            bool matches = JToken.DeepEquals(expected, restored);
            Check(matches, "the undo's state differs from the state before turn " + turn + ":\n  before "
                           + expected.ToString(Newtonsoft.Json.Formatting.None) + "\n  undone "
                           + restored.ToString(Newtonsoft.Json.Formatting.None));
            var local = player.State;
            bool replaced = JToken.DeepEquals(StateKey(local), restored) && local.Seq == undone.Seq;
            Check(replaced, "the client's state is not the undo's");
            Check(seen.UndosCopy().Count == 1, "the Undone event was not raised once");
            Fact("undo", new JObject
            {
                { "turn", undone.Turn }, { "state_turn", undone.State.Turn }, { "state_stage", undone.State.Stage },
                { "state_quote", ToToken(undone.State.VendorQuote) }, { "matches_before", matches },
                { "client_state_replaced", replaced },
            });
        }

        /// <summary>The game's voice detection gives up: the vendor nudges, and nothing changes.</summary>
        async Task SilenceAsync(SamvadClient player, Recorder seen, int turn)
        {
            var nudged = new TaskCompletionSource<ReplyEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
            Action<ReplyEvent> onNudge = r => nudged.TrySetResult(r);
            player.NudgeReceived += onNudge;
            var frame = player.Silence();
            var nudge = await Within(nudged.Task, Step, "the nudge after a silence").ConfigureAwait(false);
            player.NudgeReceived -= onNudge;
            await Within(frame.Acked, Step, "the ack of the silence").ConfigureAwait(false);
            Check(nudge.Mark == Marks.Nudge && !nudge.IsTurn && nudge.Turn == turn && !string.IsNullOrEmpty(nudge.Text),
                  "the silence got mark " + nudge.Mark + " at turn " + nudge.Turn);
            Check(nudge.InReplyTo == null || nudge.InReplyTo == frame.Id, "the nudge answers " + nudge.InReplyTo);
            Check(player.State.Turn == turn, "the nudge moved the turn to " + player.State.Turn);
            Fact("nudge", new JObject
            {
                { "mark", nudge.Mark }, { "turn", nudge.Turn }, { "text", nudge.Text },
                { "in_reply_to", nudge.InReplyTo }, { "events", seen.NudgesCopy().Count },
            });
        }

        /// <summary>Stop: the session ends as stopped, and the report counts the help taken.</summary>
        async Task StopAsync(SamvadClient player, Recorder seen)
        {
            var reported = new TaskCompletionSource<SessionReportEvent>(TaskCreationOptions.RunContinuationsAsynchronously);
            player.Report += r => reported.TrySetResult(r);
            await Within(player.Stop().Acked, Step, "the ack of stop").ConfigureAwait(false);
            var report = (await Within(reported.Task, Step, "the report after stop").ConfigureAwait(false)).Report;
            Check(report.Outcome == Outcomes.Stopped, "stop ended the session as " + report.Outcome);
            Fact("stopped", report.Outcome);
            int offered = seen.HintsCopy().Count(h => h.Offered);
            var coaching = report.Coaching;
            Check(coaching != null && coaching.Hints != null && coaching.Hints.SequenceEqual(new[] { 1, 1, 1 }),
                  "the report counts hints " + (coaching == null || coaching.Hints == null ? "none" : string.Join(",", coaching.Hints)));
            Check(coaching != null && coaching.Repeats == 1 && coaching.Undos == 1 && coaching.Timeouts == 1
                  && coaching.Unclear == 1 && coaching.HintsOffered == offered,
                  "the report's coaching counts are off");
            Check(report.Clamps != null && report.Clamps.All(c => !string.IsNullOrEmpty(c.Flag) && !string.IsNullOrEmpty(c.Explanation)),
                  "a clamp without its flag or its words");
            Check(player.LearnerReport != null && player.LearnerReport.Level == report.Level, "LearnerReport is not the report");
            Fact("report", new JObject
            {
                { "outcome", report.Outcome }, { "level", report.Level }, { "offered_hints_seen", offered },
                { "coaching", coaching == null ? null : new JObject
                    {
                        { "hints", new JArray(coaching.Hints.ToArray()) }, { "hints_offered", coaching.HintsOffered },
                        { "repeats", coaching.Repeats }, { "undos", coaching.Undos },
                        { "timeouts", coaching.Timeouts }, { "unclear", coaching.Unclear },
                    } },
                { "clamps", new JArray(report.Clamps.Select(c => (JToken)new JObject
                    {
                        { "turn", c.Turn }, { "flag", c.Flag }, { "explanation", c.Explanation },
                    }).ToArray()) },
            });
        }

        /// <summary>Where the price starts in the line (its digits, as "150" or "1,500"); a price not
        /// written in digits is cut off by stopping halfway.</summary>
        static int PriceAt(string text, int price)
        {
            var forms = new[] { price.ToString(CultureInfo.InvariantCulture), price.ToString("#,0", CultureInfo.InvariantCulture) };
            int best = -1;
            foreach (string form in forms.Distinct())
            {
                for (int at = text.IndexOf(form, StringComparison.Ordinal); at >= 0;
                     at = text.IndexOf(form, at + 1, StringComparison.Ordinal))
                {
                    bool starts = at == 0 || !(char.IsDigit(text[at - 1]) || text[at - 1] == ',');
                    int end = at + form.Length;
                    bool ends = end == text.Length || !char.IsDigit(text[end]);
                    if (starts && ends && (best < 0 || at < best)) best = at;
                }
            }
            return best >= 0 ? best : text.Length / 2;
        }

        /// <summary>The state's fields that an undo restores (all but seq and the clock).</summary>
        static JObject StateKey(SessionState state)
        {
            var key = JObject.FromObject(state);
            key.Remove("seq");
            key.Remove("updated_at");
            return key;
        }

        static JToken ToToken(int? value)
        {
            return value.HasValue ? (JToken)value.Value : JValue.CreateNull();
        }
    }
}
