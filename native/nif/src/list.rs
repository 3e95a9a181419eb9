//! List arguments decoded without rustler's list iterator, which panics on an improper list
//! (`[1 | 2]`: the panic is caught, but the caller gets `:nif_panicked` instead of an argument
//! error). Every NIF takes its list arguments as [`List`].

use rustler::{Decoder, Encoder, Env, NifResult, Term};
use std::ops::Deref;

/// A proper list's elements; anything else (an improper list, a non-list) is `badarg`.
#[derive(Clone, Debug)]
pub struct List<T>(pub Vec<T>);

impl<'a, T: Decoder<'a>> Decoder<'a> for List<T> {
    fn decode(term: Term<'a>) -> NifResult<Self> {
        let mut items = Vec::new();
        let mut rest = term;
        while !rest.is_empty_list() {
            // `Err(BadArg)` where `rest` is not a cons cell: the improper tail or a non-list.
            let (head, tail) = rest.list_get_cell()?;
            items.push(head.decode()?);
            rest = tail;
        }
        Ok(List(items))
    }
}

impl<T> Deref for List<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.0
    }
}

impl<T> IntoIterator for List<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<T: Encoder> Encoder for List<T> {
    fn encode<'a>(&self, env: Env<'a>) -> Term<'a> {
        self.0.encode(env)
    }
}

/// Whether every list in `term` (itself, or inside its lists and tuples) is proper: checked
/// before a term is decoded with rustler's own decoders, whose list iterator would panic. (A
/// walk with its own stack: a deeply nested term cannot overflow the scheduler's.)
pub fn lists_are_proper(term: Term<'_>) -> bool {
    let mut pending = vec![term];
    while let Some(t) = pending.pop() {
        if t.is_list() {
            let mut rest = t;
            while !rest.is_empty_list() {
                match rest.list_get_cell() {
                    Ok((head, tail)) => {
                        pending.push(head);
                        rest = tail;
                    }
                    Err(_) => return false,
                }
            }
        } else if t.is_tuple() {
            match rustler::types::tuple::get_tuple(t) {
                Ok(items) => pending.extend(items),
                Err(_) => return false,
            }
        }
    }
    true
}
