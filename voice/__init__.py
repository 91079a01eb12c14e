"""Speech for the session socket and the Unity build's endpoint (docs/voice.md).

- `audio`: PCM16, WAV (the shipped Unity build's header included), Ogg/Opus and WebM through
  PyAV, levels for a meter; `sentences`: cutting streamed text into pieces to speak (the first
  clause, then sentences).
- `stt`: the `SpeechToText` interface and pocketsphinx (the embedded, offline default);
  `tts`: the `TextToSpeech` interface and espeak-ng (the embedded default);
  `openai_speech`: both directions through the openai SDK, any OpenAI-compatible server.
- `speaker`: the vendor's voice for one connection, piece by piece, stopped by a barge-in;
  `playout`: the client's loudspeaker as the server follows it (is he speaking, what was heard);
  `fillers`: the thinking sounds ("Hmm..."), synthesized ahead.
- `espeak_lib`: espeak-ng's C library through ctypes: audio and phoneme samples from one pass;
  `visemes`: the 15 OpenXR visemes, our IPA table and per-chunk timelines; `estimate`: visemes for
  audio without timings; `align`: by pocketsphinx's forced alignment; `lipsync`: which each sentence
  gets (docs/voice.md, Visemes).
- `scene_stt`: offline recognition biased to the scene (issue #41), made of `scene_corpus` (what a
  learner may say in a pack), `arpa` (the trigram model), `g2p` (espeak-ng pronunciations in CMU
  phones), `numerals` (prices in words), `denoise` (steady noise filtered out of an utterance and
  measured) and `confidence` (the calibrated confidence);
  `vosk_stt`: the optional engine an operator installs.
- `vad`: voice activity over the open microphone (Silero VAD); `turn_end`: when the learner has
  finished a turn (pauses, fillers, the level); `barge_in`: whether speech over the vendor stops him
  (backchannels do not); `turn_words`: the fillers, backchannels and continuation words they read
  (`continuations`: the grammar words after which no sentence ends, mostly; docs/voice.md, End of turn
  and barge-in, issue #34); `open_mic`: the open microphone's stream cut
  into turns, with the audio of each and its pauses to decode early, and its speech over the
  vendor judged a backchannel or an interruption.
- `fluency`: words a minute, pauses, runs and fillers from the recogniser's word times (docs/learning.md).
- `errors`: the package's exceptions.

It imports `schemas`, the brain's transport settings (`brain.transport`) and `privates` (the SDK's
aiohttp response, for the speech calls' byte reads), nothing above them.
"""

from voice.audio import decode_clip, levels, parse_wav, wav_bytes
from voice.barge_in import BargeIn, Verdict, VerdictKind
from voice.errors import AudioRejected, SpeechServiceError, VoiceError
from voice.fillers import FillerBank
from voice.playout import Playout
from voice.sentences import SentenceSplitter, split_sentences
from voice.speaker import FillerClip, Speaker
from voice.stt import SpeechToText, Transcription
from voice.tts import TextToSpeech
from voice.turn_end import EndOfTurn, TurnEnded, UtteranceEnded
from voice.turn_words import TurnWords
from voice.vad import VadFrame, VadStream, default_detector

__all__ = [
    "AudioRejected",
    "BargeIn",
    "EndOfTurn",
    "FillerBank",
    "FillerClip",
    "Playout",
    "SentenceSplitter",
    "Speaker",
    "SpeechServiceError",
    "SpeechToText",
    "TextToSpeech",
    "Transcription",
    "TurnEnded",
    "TurnWords",
    "UtteranceEnded",
    "VadFrame",
    "VadStream",
    "Verdict",
    "VerdictKind",
    "VoiceError",
    "decode_clip",
    "default_detector",
    "levels",
    "parse_wav",
    "split_sentences",
    "wav_bytes",
]
